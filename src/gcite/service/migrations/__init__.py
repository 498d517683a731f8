"""Alembic migrations of the conversation store (append-only; applied at start-up).

:func:`gcite.service.store.migrate` runs them programmatically (no ``alembic.ini``):
``env.py`` takes the connection from ``config.attributes["connection"]``; the version
table is ``gcite_alembic_version`` so a shared PostgreSQL database can hold other
applications' Alembic histories. Revision ``0001`` is the schema the store had before
migrations existed (``create_all``): a database without the version table but with the
tables is stamped at ``0001`` and upgraded from there.
"""
