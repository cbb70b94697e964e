"""Configuration: the Java .properties parser, the key table, and the typed settings they produce.

May import: ``core``, ``retry`` and ``errors`` only; Java key names appear nowhere else.
"""
