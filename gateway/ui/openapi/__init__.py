"""The read API's OpenAPI 3.1 description, generated from its route table and models."""
