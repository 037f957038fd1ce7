"""Automations: long-lived agents, each a persona page and a trigger, run by the server (``docs/automations.md``).

::

    definitions.py  what an automation is (pydantic): persona, prompt, trigger, tools, limits, mode
    cron.py         the next time a schedule fires
    templates.py    ``{{ payload.path.to.field }}``: a delivery's fields mapped into the prompt
    store.py        SQLite under ``.betty/``: automations, hashed webhook secrets, runs with leases
    control.py      the gate before each tool call: pause holds a run there, kill stops it
    runner.py       claims queued runs, runs each as an agent session, the sweeper, the triggers
    host.py         what a run's code is given: the runner as its host, the session of a run
    builtins.py     the automations Betty's own code runs (babysitter.py: the job babysitter), by id
"""
