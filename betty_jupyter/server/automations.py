"""Automations over REST: define, list, pause, resume, run, kill, read runs; and the webhook each may have.

``POST hooks/{id}`` is the one route of Betty's API that Jupyter does not authenticate: the
sender (a CI service, a monitoring system) holds no Jupyter token, only the automation's own
secret, sent in ``X-Betty-Secret`` and compared in constant time with the stored hash. It
answers ``202 {run_id}`` as soon as the run is queued, before any of it starts; a delivery
id (``X-Betty-Delivery``) seen before answers ``200`` with the run it started then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tornado import web

from ..agent.automations.transcripts import read_transcript, transcript_path
from ..json_text import parse_json
from .base import BettyHandler, allow_unauthenticated, refused

if TYPE_CHECKING:
    from ..agent.automations.definitions import Automation, AutomationSpec
    from ..agent.automations.runner import AutomationRunner

AUTOMATION = r"/betty/api/automations/(?P<automation_id>[^/]+)"
SECRET_HEADER = "X-Betty-Secret"
DELIVERY_HEADER = "X-Betty-Delivery"
MAX_PAYLOAD = 1024 * 1024
MAX_DELIVERY_ID = 200
NO_SECRET = f"this webhook needs its automation's secret in the {SECRET_HEADER} header"


class AutomationBase(BettyHandler):
    """What the automation handlers share: the runner, a known automation, a checked definition."""

    @property
    def runner(self) -> "AutomationRunner":
        """The server's automation runner."""
        return self.services.automations

    def automation(self, automation_id: str) -> "Automation":
        """The automation; 404 when there is none of that id."""
        found = self.runner.store.get(automation_id)
        if found is None:
            raise refused(404, f"no automation {automation_id[:60]!r}; GET automations lists them")
        return found

    def definition(self) -> "AutomationSpec":
        """The body as a definition whose persona, tools and cluster exist here, 400 naming what does not, in a mode
        the site allows, 403 otherwise (never one that could only fail at each of its runs)."""
        # lazy: pydantic and croniter; the server's extension loads without them
        from ..agent.automations.definitions import AutomationSpec, problems

        spec = self.body(AutomationSpec)
        self.betty_config.site.check_mode(spec.mode)  # SiteRefusal (403): "your site does not allow auto mode; …"
        found = problems(spec, self.services.workspace, self.betty_config)
        if found:
            raise refused(400, "; ".join(found))
        return spec

    def answer_automation(self, automation: "Automation", secret: str | None = None, status: int = 200) -> None:
        """The automation as JSON; with ``secret`` the one time it is shown."""
        data = automation.model_dump(mode="json")
        if secret is not None:
            data["secret"] = secret
        self.answer(data, status)


class AutomationsHandler(AutomationBase):
    """``GET automations``: every automation; ``POST automations``: define one."""

    @web.authenticated
    def get(self) -> None:
        """``{automations: [Automation]}``, oldest first."""
        self.answer({"automations": [a.model_dump(mode="json") for a in self.runner.store.all()]})

    @web.authenticated
    def post(self) -> None:
        """201 ``Automation`` (with ``secret`` once, for a webhook)."""
        automation, secret = self.runner.store.create(self.definition())
        self.runner.changed()
        self.answer_automation(automation, secret, 201)


class AutomationHandler(AutomationBase):
    """``GET``, ``PUT`` and ``DELETE automations/{id}``."""

    @web.authenticated
    def get(self, automation_id: str) -> None:
        """The ``Automation``."""
        self.answer_automation(self.automation(automation_id))

    @web.authenticated
    def put(self, automation_id: str) -> None:
        """A new definition; it applies from the next run (a running one goes on as it began)."""
        self.automation(automation_id)
        automation, secret = self.runner.store.replace(automation_id, self.definition())
        self.runner.changed()
        self.answer_automation(automation, secret)

    @web.authenticated
    def delete(self, automation_id: str) -> None:
        """``{deleted: true}``; 409 while a run of it is running (kill it first)."""
        self.automation(automation_id)
        if self.runner.store.runs(automation_id, "running", limit=1):
            raise refused(409, f"automation {automation_id} is running; kill its run first (POST "
                               f"automations/{automation_id}/kill)")
        self.runner.store.delete(automation_id)
        self.answer({"deleted": True})


class PauseHandler(AutomationBase):
    """``POST automations/{id}/pause``: triggers stop firing; a running run waits before its next tool call."""

    @web.authenticated
    def post(self, automation_id: str) -> None:
        """The paused ``Automation``."""
        self.automation(automation_id)
        paused = self.runner.pause(automation_id)
        assert paused is not None
        self.answer_automation(paused)


class ResumeHandler(AutomationBase):
    """``POST automations/{id}/resume``: from paused or error-suspended back to work."""

    @web.authenticated
    def post(self, automation_id: str) -> None:
        """The resumed ``Automation`` (idle, or active when a run goes on)."""
        self.automation(automation_id)
        resumed = self.runner.resume(automation_id)
        assert resumed is not None
        self.answer_automation(resumed)


class RunNowHandler(AutomationBase):
    """``POST automations/{id}/run``: a manual run (queued; a paused automation starts it once resumed)."""

    @web.authenticated
    def post(self, automation_id: str) -> None:
        """202 ``{run_id, status}``; 409 while the automation is error-suspended."""
        automation = self.automation(automation_id)
        if automation.status == "error-suspended":
            raise refused(409, f"automation {automation_id} is suspended after {automation.failures} failed runs; "
                               "resume it first")
        run, _ = self.runner.run_now(automation_id)
        self.answer({"run_id": run.id, "status": run.status}, 202)


class KillHandler(AutomationBase):
    """``POST automations/{id}/kill``: the kill switch; its running run stops within one step."""

    @web.authenticated
    def post(self, automation_id: str) -> None:
        """``{killed: [run ids]}``: the queued and running runs it stopped."""
        self.automation(automation_id)
        self.answer({"killed": self.runner.kill(automation_id)})


class RunsHandler(AutomationBase):
    """``GET automations/{id}/runs?limit=50``: the newest runs, with what each used."""

    @web.authenticated
    def get(self, automation_id: str) -> None:
        """``{runs: [Run]}``, newest first."""
        self.automation(automation_id)
        limit = int(self.query_number("limit", 50, 1, 1000))
        runs = self.runner.store.runs(automation_id, limit=limit)
        self.answer({"runs": [self.runner.live(run).model_dump(mode="json") for run in runs]})


class RunHandler(AutomationBase):
    """``GET automations/{id}/runs/{run}?after=N``: one run and its transcript."""

    @web.authenticated
    def get(self, automation_id: str, run_id: str) -> None:
        """``Run`` + ``events``: its session's events after the first N (all attempts)."""
        run = self.runner.store.run(run_id)
        if run is None or run.automation != automation_id:
            raise refused(404, f"automation {automation_id[:60]} has no run {run_id[:40]!r}")
        after = int(self.query_number("after", 0, 0, 2**53))
        events = read_transcript(transcript_path(self.services.workspace.state, run_id), after)
        self.answer({**self.runner.live(run).model_dump(mode="json"), "events": events})


class HookHandler(BettyHandler):
    """``POST hooks/{id}``: a webhook delivery, authenticated by the automation's secret alone."""

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: the secret travels in a header a browser never sends by itself."""

    @allow_unauthenticated
    def post(self, automation_id: str) -> None:
        """202 ``{run_id, status}`` once queued; 200 ``replayed`` for a known delivery id; 403 without the secret."""
        # lazy: pydantic and croniter; the server's extension loads without them
        from ..agent.automations.store import AutomationStore, store_path

        secret = self.request.headers.get(SECRET_HEADER, "")
        if not secret or len(secret) > 512:
            raise refused(403, NO_SECRET)
        store = AutomationStore.existing(store_path(self.services.workspace.state))
        if store is None or not store.verify_secret(automation_id, secret):
            raise refused(403, NO_SECRET)
        automation = store.get(automation_id)
        if automation is None or automation.status == "error-suspended":
            raise refused(409, f"automation {automation_id} is suspended after failed runs; a person must resume it")
        payload = self._payload()
        self.services.start()
        run, new = self.services.automations.run_now(automation_id, "webhook", payload, self._delivery_id())
        self.answer({"run_id": run.id, "status": run.status, "replayed": not new}, 202 if new else 200)

    def _payload(self) -> Any:
        body = self.request.body
        if len(body) > MAX_PAYLOAD:
            raise refused(413, f"the delivery is over {MAX_PAYLOAD // 1024} KiB; send the fields the automation needs")
        try:
            return parse_json(body) if body.strip() else None
        except ValueError as exc:
            raise refused(400, f"the delivery is not valid JSON ({exc})") from None

    def _delivery_id(self) -> str | None:
        given = self.request.headers.get(DELIVERY_HEADER, "").strip()
        if not given:
            return None
        if len(given) > MAX_DELIVERY_ID or not given.isprintable():
            raise refused(400, f"{DELIVERY_HEADER} must be printable text of at most {MAX_DELIVERY_ID} characters")
        return f"webhook:{given}"


handlers = [
    (r"/betty/api/automations", AutomationsHandler),
    (AUTOMATION, AutomationHandler),
    (AUTOMATION + r"/pause", PauseHandler),
    (AUTOMATION + r"/resume", ResumeHandler),
    (AUTOMATION + r"/run", RunNowHandler),
    (AUTOMATION + r"/kill", KillHandler),
    (AUTOMATION + r"/runs", RunsHandler),
    (AUTOMATION + r"/runs/(?P<run_id>[^/]+)", RunHandler),
    (r"/betty/api/hooks/(?P<automation_id>[^/]+)", HookHandler),
]
"""The automation routes, and the webhook route."""
