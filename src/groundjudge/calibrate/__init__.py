"""Calibrate stage (SPEC 6): judge-human agreement, trust in a judge, bias-corrected rates."""
