"""The worker's pure rules: its health verdict and the status page's figures.

The twin of :mod:`kcl_daemon.worker`.
"""
