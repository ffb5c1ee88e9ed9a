"""`Behaviour`: one teamwork behaviour as a named, separately optimizable predictor."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any

import dspy

from teammed import interrupts
from teammed.adapter import SchemaAdapter
from teammed.lm_usage import counted_calls
from teammed.usage import calling_signature

__all__ = ["Behaviour", "showing_image", "as_image"]

# The image of the question being answered, shown to every behaviour called while it is
# set (unless built with ``sees_image=False``); set by the peer systems around one question.
_question_image: contextvars.ContextVar[dspy.Image | None] = contextvars.ContextVar("teammed_image", default=None)


@functools.cache
def _named_class(name: str) -> type[Behaviour]:
    """A subclass of `Behaviour` called ``name`` (one per name), so spans (MLflow: ``<class>.forward``) and
    module histories name the behaviour instead of ``Behaviour.forward``."""
    return type(name, (Behaviour,), {"__module__": __name__, "__qualname__": name,
                                     "__doc__": f"The {name} behaviour (a `Behaviour`)."})


def as_image(source: str | dspy.Image) -> dspy.Image:
    """A local path becomes an embedded image; URLs and data URIs are passed as they are."""
    if isinstance(source, dspy.Image):
        return source
    if source.startswith(("http://", "https://", "data:")):
        return dspy.Image(source)
    return dspy.Image.from_path(source)


@contextlib.contextmanager
def showing_image(image: str | dspy.Image | None) -> Iterator[None]:
    """Within this block, every behaviour (but those built with ``sees_image=False``) is shown ``image``."""
    token = _question_image.set(as_image(image) if image else None)
    try:
        yield
    finally:
        _question_image.reset(token)


class _Predict(dspy.Predict):
    """`dspy.Predict` whose ``load_state`` matches saved fields by prefix when they do not line up.

    DSPy restores field prefixes and descriptions by position. A program compiled before a
    signature gained inputs (issue 18 added the case, ``question`` and ``options``, to the
    leader's, monitoring and closed-loop behaviours) would shift every description onto the
    wrong field; here each field takes the saved entry with its own prefix, and a new field
    keeps its definition.
    """

    def load_state(self, state: dict[str, Any], **kwargs: Any) -> dspy.Predict:
        saved = (state.get("signature") or {}).get("fields")
        fields = list(self.signature.fields.values())
        if isinstance(saved, list) and saved:
            prefixes = [(f.json_schema_extra or {}).get("prefix") for f in fields]
            if [e.get("prefix") for e in saved if isinstance(e, dict)] != prefixes:
                by_prefix = {e.get("prefix"): e for e in saved if isinstance(e, dict)}
                aligned = [by_prefix.get(p) or {"prefix": p, "description": (f.json_schema_extra or {}).get("desc")}
                           for p, f in zip(prefixes, fields, strict=True)]
                state = {**state, "signature": {**state["signature"], "fields": aligned}}
        return super().load_state(state, **kwargs)


class Behaviour(dspy.Module):
    """Wraps one `dspy.Predict` and tags its LM calls with the behaviour's name.

    The name is the signature's class name at construction; it stays stable when an
    optimizer rewrites the instructions, so accounting and schemas keep their labels.
    Each instance's class is a subclass named after the behaviour (``isinstance(b, Behaviour)``
    holds), which is what DSPy callbacks and MLflow traces show.

    Inside a `showing_image` block (the peer systems open one per image question) the
    behaviour is shown the question's image as an extra ``image`` input of its signature,
    unless built with ``sees_image=False``; its saved state (demos, instructions) is the same
    with or without an image. The teamwork program shows images its own way (round 2 only).

    ``temperature``, when given, samples this behaviour's calls at it instead of the run's
    temperature (a system that follows its paper's sampling, `ConsultationTeam`).
    """

    def __init__(self, signature: type[dspy.Signature], *, sees_image: bool = True,
                 temperature: float | None = None):
        super().__init__()
        self.name = signature.__name__
        self.sees_image = sees_image
        self.predict = _Predict(signature, **({} if temperature is None else {"temperature": temperature}))
        if type(self) is Behaviour:
            self.__class__ = _named_class(self.name)

    def __reduce_ex__(self, protocol: Any) -> Any:  # the named class is not importable: pickle as Behaviour
        return (_rebuild, (self.name, self.__dict__.copy()))

    def forward(self, **inputs: Any) -> dspy.Prediction:
        interrupts.check_cancelled()  # a cancelled acall makes no further call
        token = calling_signature.set(self.name)
        image = _question_image.get() if self.sees_image else None
        if image is not None and "image" not in inputs:
            inputs["image"] = image
            inputs["signature"] = self.predict.signature.append(
                "image", dspy.InputField(desc="The image the question refers to."), type_=dspy.Image)
        # teammed's schema adapter when the caller configured none (a plain ``dspy.LM`` works as is)
        adapter = SchemaAdapter() if dspy.settings.adapter is None else None
        try:
            with contextlib.ExitStack() as stack:
                if adapter is not None:
                    stack.enter_context(dspy.context(adapter=adapter))
                # teammed's adapter records each call itself (`call_lm`); under any other adapter a
                # plain LM's calls are recorded around the behaviour
                if not isinstance(dspy.settings.adapter, SchemaAdapter):
                    counting = counted_calls(self.predict.lm or dspy.settings.lm, self.name)
                    if counting is not None:
                        stack.enter_context(counting)
                return self.predict(**inputs)
        finally:
            calling_signature.reset(token)


def _rebuild(name: str, state: dict[str, Any]) -> Behaviour:
    obj = Behaviour.__new__(_named_class(name))
    obj.__dict__.update(state)
    return obj
