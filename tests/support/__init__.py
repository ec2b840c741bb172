"""What the tests share: fixtures' helpers, the server sandbox, a throw-away PostgreSQL cluster."""
