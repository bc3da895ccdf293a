"""Matchers: the :class:`Matcher` protocol and its implementations."""

from siftbus.match.base import Matcher, add_all
from siftbus.match.reference import ReferenceMatcher

__all__ = ["Matcher", "ReferenceMatcher", "add_all"]
