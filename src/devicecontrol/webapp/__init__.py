"""The owners' web app at /app/: server-rendered pages (Jinja2) with htmx, live through the
event streams, on a cookie session (auth/sessions.py). It calls the API's own services."""
