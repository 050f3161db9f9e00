"""A database backend of a site's own, built on Django's PostgreSQL one (as PostGIS is)."""
