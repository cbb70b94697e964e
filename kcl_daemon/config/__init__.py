"""Configuration: the Java .properties parser, the key table, and the typed settings they produce."""
