"""The board farm: a job service on labgrid, agents next to the boards, the ``api`` backend.

* ``service``/``routes_*`` — FastAPI app (REST under ``/api``), ``db`` (SQLAlchemy),
  ``store`` (content-addressed exports), ``auth`` (users, roles, expiring tokens);
* ``coordinator`` — the labgrid link: places, reservations (the queue) and locks;
* ``dispatch`` — the service's loop that follows reservations and agents' heartbeats;
* ``agent`` — the process on a board host; ``forkserver`` starts each job's process,
  ``jobprocess`` is what runs in it (one deploy);
* ``client``/``remote`` — the HTTP client and the ``api`` backend (``deploy()`` hands it the
  whole deploy of an ``api`` config; registered for every target).

The service and the agent need the ``farm`` extra (``pip install aidge-deploy[farm]``);
the ``api`` backend needs only the core package.
"""
