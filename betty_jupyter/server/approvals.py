"""Approvals a person answers over REST, and the action log that records every decision."""

from __future__ import annotations

from tornado import web

from ..agent.vocabulary import Decision
from ..errors import CardChangedError
from .base import BettyHandler, approver, refused

MAX_ACTIONS = 10_000


class ApprovalsHandler(BettyHandler):
    """``GET approvals?session=ID``: the approvals open now, oldest first, each with its session and task."""

    @web.authenticated
    def get(self) -> None:
        """``{approvals: [WaitingApproval]}``."""
        from ..agent.events import WaitingApproval  # lazy: the request models are pydantic; the extension loads without them

        waiting = [WaitingApproval(**request.model_dump(), session_id=session_id).model_dump(mode="json")
                   for session_id, request in self.assistant.waiting(self.query("session"))]
        self.answer({"approvals": waiting})


class ApprovalHandler(BettyHandler):
    """``POST approvals/{id}``: a person's answer; the approver is the authenticated person, in the face they name."""

    @web.authenticated
    async def post(self, approval_id: str) -> None:
        """The ``Resolution``; 400 for an edit the tool refuses (the card stays open), 404 for an unknown
        approval, 409 for one already answered."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import DecisionRequest

        request = self.body(DecisionRequest)
        if request.decision == Decision.EDITED and request.args is not None:
            await self.assistant.repreview(approval_id, request.args)  # a refused edit: 400, the card stays open
        if not any(open_.approval_id == approval_id for open_ in self.assistant.pending()):
            earlier = self.assistant.answered(approval_id)
            if earlier is None:
                raise refused(404, f"no open approval {approval_id[:40]!r}; it may belong to another server")
            by = f" by {earlier.approver}" if earlier.approver else ""
            raise refused(409, f"approval {approval_id} was already resolved ({earlier.decision}{by}); nothing changed")
        try:
            resolution = self.assistant.respond(approval_id, request.decision,
                                                approver(self.current_user, request.face), request.args, request.digest)
        except CardChangedError as error:
            raise refused(409, str(error)) from None
        self.answer(resolution.model_dump(mode="json"))


class ApprovalPreviewHandler(BettyHandler):
    """``POST approvals/{id}/preview {args}``: a person's edit of an open card, checked by the same tool and
    policy code as the model's call and previewed again; nothing runs and the card stays open."""

    @web.authenticated
    async def post(self, approval_id: str) -> None:
        """``EditPreview``; 400 with the one-line reason for a refused edit, 404 when the card is not open."""
        from .models import EditRequest  # lazy: the request models are pydantic; the extension loads without them

        if not any(open_.approval_id == approval_id for open_ in self.assistant.pending()):
            raise refused(404, f"no open approval {approval_id[:40]!r}; it was answered, expired or belongs to "
                               "another server")
        preview = await self.assistant.repreview(approval_id, self.body(EditRequest).args)
        self.answer({"preview": preview.model_dump(mode="json")})


class ApprovalStartHandler(BettyHandler):
    """``GET approvals/{id}/start``: when and where an open submission card's job would start, asked of the
    scheduler after the card is shown (the card never waits for it)."""

    @web.authenticated
    async def get(self, approval_id: str) -> None:
        """``StartEstimate``: one line, "" for a card that submits nothing; 404 when the card is not open."""
        from .models import StartEstimate  # lazy: the answer models are pydantic; the extension loads without them

        if not any(open_.approval_id == approval_id for open_ in self.assistant.pending()):
            raise refused(404, f"no open approval {approval_id[:40]!r}; it was answered, expired or belongs to "
                               "another server")
        self.answer(StartEstimate(estimate=await self.assistant.start_estimate(approval_id)))


class ActionsHandler(BettyHandler):
    """``GET actions?session=&limit=200``: the newest action-log records, oldest first."""

    @web.authenticated
    def get(self) -> None:
        """``{actions: [ActionRecord]}``."""
        limit = int(self.query_number("limit", 200, 1, MAX_ACTIONS))
        records = self.assistant.history(self.query("session"), limit)
        self.answer({"actions": [record.model_dump(mode="json") for record in records]})


handlers = [
    (r"/betty/api/approvals", ApprovalsHandler),
    (r"/betty/api/approvals/(?P<approval_id>[^/]+)", ApprovalHandler),
    (r"/betty/api/approvals/(?P<approval_id>[^/]+)/preview", ApprovalPreviewHandler),
    (r"/betty/api/approvals/(?P<approval_id>[^/]+)/start", ApprovalStartHandler),
    (r"/betty/api/actions", ActionsHandler),
]
"""The approval and action-log routes."""
