"""Load stage: read inputs into contracts, with errors that name file, line and field."""
