"""AWS adapters: the only package that imports boto3/botocore.

Everything here is synchronous; shells call it off the event loop on bounded thread pools. No botocore
exception leaves this package: :func:`kcl_daemon.aws.errors.map_aws_errors` turns them into the
``AwsError`` branch of :mod:`kcl_daemon.errors`.

May import: ``config``, ``core``, ``retry``, ``errors``; never anything that sits above it.
"""
