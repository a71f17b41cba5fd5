"""The feedback store: every segment, query, judgement, rating and annotator of a run."""

from preflab.store.feedback_store import SCHEMA_VERSION, FeedbackStore, mask_url, strip_password

__all__ = ["SCHEMA_VERSION", "FeedbackStore", "mask_url", "strip_password"]
