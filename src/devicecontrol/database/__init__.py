"""The database: engines and their writers, the schema, migrations, prepared hot statements."""
