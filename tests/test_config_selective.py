"""Settings for selective trust: [trust] target_agreement, risk, min_coverage and [judge.escalate]."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundjudge.config import load_config
from groundjudge.errors import InputError


def test_selective_trust_settings_and_the_escalation_judge(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[trust]\ntarget_agreement = 0.95\nrisk = 0.05\nmin_coverage = 0.6\n\n'
                    '[judge.escalate]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "big-judge-1"\n')
    config = load_config(path)
    assert (config.trust.target_agreement, config.trust.risk, config.trust.min_coverage) == (0.95, 0.05, 0.6)
    assert config.judge.escalate is not None and config.judge.escalate.model == "big-judge-1"
    assert config.judge.escalate.rubric is None
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    plain = load_config(empty)
    assert (plain.trust.target_agreement, plain.trust.risk, plain.trust.min_coverage) == (0.9, 0.1, 0.8)
    assert plain.judge.escalate is None


@pytest.mark.parametrize(("text", "field"), [
    ("[trust]\nrisk = 1.5\n", "trust.risk"),
    ("[trust]\ntarget_agreement = 1\n", "trust.target_agreement"),
    ('[judge.escalate]\nbase_url = "http://x/v1"\n', "judge.escalate.model"),
    ('[judge.escalate]\nbase_url = "http://x/v1"\nmodel = "m"\ntemperature = 0\n', "judge.escalate.temperature"),
])
def test_bad_selective_settings_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert field in str(caught.value)
