"""Team mode: a data folder shares some of its projects with a team's PostgreSQL server.

Local first: every memory is written to the local store, then the change waits in the
outbox (:mod:`lexmem.team.outbox`), fed at the store's one choke point
(:mod:`lexmem.team.recorder`); the single writer pushes it and pulls the team's changes
back into the local store (:mod:`lexmem.team.sync`), so search works offline on both.
Joining, leaving and the status are :mod:`lexmem.team.membership`. The server's side is
:mod:`lexmem.store.postgres.team`.
"""
