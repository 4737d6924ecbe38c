"""The read API's answers as pydantic models: the handlers dump through them and the
OpenAPI document is generated from them, one source of truth for the JSON shapes."""
