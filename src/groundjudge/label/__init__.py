"""Label stage: pick the items worth a person's time with known probabilities, serve a local
labelling page, append each label as it is given, and estimate agreement without selection bias."""

from groundjudge.label.batch import LabelPlan, default_labels_path, prepare_batch
from groundjudge.label.estimate import KappaEstimate, estimate_kappa
from groundjudge.label.picker import STRATEGIES, plan_batch
from groundjudge.label.session import agreement_estimates, open_session

__all__ = [
           "STRATEGIES",
           "KappaEstimate",
           "LabelPlan",
           "agreement_estimates",
           "default_labels_path",
           "estimate_kappa",
           "open_session",
           "plan_batch",
           "prepare_batch",
]
