"""Lease coordination shells: renewing held leases and taking leases, around the pure core."""
