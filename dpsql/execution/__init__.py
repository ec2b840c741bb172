"""The execution layer: the plan as one engine query (rewrite), then noise (perturb) and
post-processing over noisy cells, exact reads of public tables, and the time limits of an answer."""
