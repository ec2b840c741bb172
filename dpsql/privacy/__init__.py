"""The privacy layer: the plan (sensitivities, key release, the budget split, noise per cell) and
the mechanisms, samplers and accounting it relies on."""
