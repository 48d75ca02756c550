"""The JSON Schema of the report (``report.schema.json``), shipped as package data."""
