"""``aidge-deploy mcp``: the Model Context Protocol server agents drive aidge-deploy through.

Why this package exists: an agent needs a door into the lab that says what it may do and
what it may spend. The server (``server``, on the official ``mcp`` SDK) exposes the targets,
``doctor``, ``profile``, ``validate``, ``compare``, the results history and the farm's
submit/status/cancel as tools, each annotated read-only or destructive; it calls the same
API the CLI calls (``modelprofile``, ``validation``, ``report.compare``, ``history.query``,
``farm.remote``) and holds no logic of its own beyond the session's rules: a read-only mode
and an allowlist of targets and boards (``policy``), a budget of runs and board-minutes
that is enforced while runs go on (``budget``), every figure with its unit and provenance
and no secret in any output (``outputs``), and runs that stop — every process with them —
when the call is cancelled or the session ends (``calls``).
"""
