"""Command line: a thin shell over the library API (``groundjudge.api``)."""

from __future__ import annotations

import copy
import gc
import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from groundjudge.errors import InputError, JudgeUnavailable, StorageError
from groundjudge.inert import terminal, terminal_json
from groundjudge.urls import redact_url

if TYPE_CHECKING:
    from groundjudge.report.document_view import MetricsView

# Heavy modules (the judge client, scikit-learn, rich, the report renderers) are imported inside
# the commands that use them: `groundjudge metrics` and `--help` start in a fraction of a second.

EXIT_BAD_INPUT = 2
EXIT_JUDGE_UNREACHABLE = 3
EXIT_BATCH_PENDING = 4  # run --batch / batch collect: a batch is submitted or still running; run again later
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report a process a SIGINT ended


class GroundjudgeGroup(click.Group):
    """Turns input errors into one clear message and exit code 2, never a traceback; Ctrl-C
    into exit code 130."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Not 1 (a failed gate): by here every `with` has unwound, so the judge session is
            # closed (the embedded server stopped) and nothing half-written is left.
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except click.Abort as exc:
            if not isinstance(exc.__context__, KeyboardInterrupt):
                raise  # a question answered "no"
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except JudgeUnavailable as exc:
            click.echo(f"error: judge unavailable: {terminal(exc)}", err=True)
            ctx.exit(EXIT_JUDGE_UNREACHABLE)
        except StorageError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except InputError as exc:
            # Plain echo, not rich: a message must never be wrapped mid-path.
            click.echo("error: bad input", err=True)
            for problem in exc.problems:
                click.echo(f"  {terminal(problem)}", err=True)  # values quoted from inputs stay inert
            ctx.exit(EXIT_BAD_INPUT)


@click.group(cls=GroundjudgeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="groundjudge")
def main() -> None:
    """Grade RAG answers: exact retrieval and citation metrics, a pinned and calibrated judge, gates."""


def default_out() -> Path:
    return Path("runs") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def print_summary(doc: MetricsView, quiet: bool) -> None:
    if quiet:
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from groundjudge.report.markdown import fmt, headline_metrics

    # Text, not str: rich would read "[link=...]" in a config id as its own markup
    table = Table(title="groundjudge metrics", show_lines=False)
    table.add_column("metric")
    for cfg in doc.configs:
        table.add_column(Text(terminal(cfg)), justify="right")
    for metric in headline_metrics(doc)[:14]:
        table.add_row(Text(terminal(metric)), *(fmt(doc.per_config[cfg].aggregate.get(metric))
                                                for cfg in doc.configs))
    Console(highlight=False).print(table)


def format_choices() -> Sequence[str]:
    from groundjudge.load.adapters import format_choices as registered

    return registered()


def profile_names() -> Sequence[str]:
    from groundjudge.profiles import profile_names as registered

    return registered()


class RegistryChoice(click.Choice[str]):
    """A choice among a registry's names, read when the option is used (not when this module is
    imported), so a system registered later is a valid choice too."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        # click.Choice.__init__ would copy the names once, at import; read them on use instead.
        self._names = names
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]  # read-only on purpose: names come from the registry
        return tuple(self._names())


_KNOBS = "groundjudge.knobs"  # ctx.meta: whether this call reads the profiles' knobs


class ProfileKnobsCommand(click.Command):
    """A command that also takes every registered profile's knobs as flags (``--gates``,
    ``--scu_enforced``), read from the profiles registry when the command is used, so a
    profile registered later brings its knobs along. A knob whose flag is already an option of
    the command (``--k``) takes that option's value."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if ctx.meta.get(_KNOBS) is False:
            return super().get_params(ctx)
        help_option = self.get_help_option(ctx)
        params = [param for param in super().get_params(ctx) if param is not help_option]
        knobs = {opt.opts[0]: opt for opt in _knob_options()}
        for i, param in enumerate(params):
            shared = next((knobs.pop(flag) for flag in param.opts if flag in knobs), None)
            if shared is not None and isinstance(param, click.Option):
                # the command's own option, also a knob: its help says so (on a copy: the
                # command's option is shared by every call)
                params[i] = copy.copy(param)
                params[i].help = f"{param.help} {shared.help}"
        return params + list(knobs.values()) + ([help_option] if help_option is not None else [])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # The profiles (and what they load) are read only when the call may name a knob: with
        # --profile, a flag that is no option of the command, or help. A plain call (`metrics
        # --qrels Q --run R`) starts without them.
        ctx.meta[_KNOBS] = self._may_name_a_knob(ctx, args)
        if not ctx.meta[_KNOBS]:
            return super().parse_args(ctx, args)
        from groundjudge.profiles import profile_knobs

        return super().parse_args(ctx, _joined_words(args, {f for k in profile_knobs() if k.words for f in k.flags}))

    def _may_name_a_knob(self, ctx: click.Context, args: list[str]) -> bool:
        own = {flag for param in super().get_params(ctx) if isinstance(param, click.Option)
               for flag in (*param.opts, *param.secondary_opts)}
        for arg in args:
            if arg == "--":
                return False
            flag = arg.partition("=")[0]
            if flag == "--profile" or flag in ctx.help_option_names or (arg.startswith("-") and flag not in own):
                return True
        return False


def _knob_dest(flag: str) -> str:
    return "knob_" + flag.lstrip("-").replace("-", "_")


def _knob_options() -> list[click.Option]:
    from groundjudge.profiles import profile_knobs

    grouped: dict[tuple[str, ...], list[Any]] = {}
    for knob in profile_knobs():  # profiles sharing a flag share its spellings (register_profile)
        grouped.setdefault(knob.flags, []).append(knob)
    options = []
    for flags, knobs in grouped.items():
        first = knobs[0]
        text = " ".join(f"[--profile {k.profile}] {k.help}".strip() for k in knobs)
        options.append(click.Option([*flags, _knob_dest(flags[0])], is_flag=first.switch,
                                    default=None, multiple=first.many, help=text))
    return options


def _joined_words(args: list[str], flags: set[str]) -> list[str]:
    """``args`` with the ``name=value`` words after a flag that takes them joined into its value:
    ``--gates precision=0.80 chr=0.75`` -> ``--gates "precision=0.80 chr=0.75"``."""
    out: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            out += [token, *args[i:]]
            break
        if token in flags and i < len(args):
            out.append(token)
            token, i = args[i], i + 1
        elif not any(token.startswith(f"{flag}=") for flag in flags):
            out.append(token)
            continue
        while i < len(args) and "=" in args[i] and not args[i].startswith("-"):
            token, i = f"{token} {args[i]}", i + 1
        out.append(token)
    return out


def profile_flags(ctx: click.Context, profile: str | None) -> dict[str, Any]:
    """The knobs of ``profile`` given on the command line, as ``profile.<name>.<knob>`` settings
    for ``api.resolve_config``. A knob flag that belongs only to other profiles (or given with no
    ``--profile``) is an input error naming the profiles it belongs to."""
    if ctx.meta.get(_KNOBS) is False:
        return {}  # neither --profile nor a flag the command does not have: no knob was given
    from groundjudge.profiles import profile_knobs

    knobs = profile_knobs()
    own = {opt: param for param in ctx.command.params for opt in param.opts}
    out: dict[str, Any] = {}
    for knob in knobs:
        param = own.get(knob.flags[0])
        value = ctx.params.get(param.name if param is not None else _knob_dest(knob.flags[0]))
        if value is None or value == ():
            continue
        if knob.profile == profile:
            if isinstance(value, tuple) and not knob.many:
                if len(value) > 1:
                    raise InputError.one("command line", None, knob.flags[0],
                                         f"the {profile} profile takes one value, got {len(value)}: "
                                         + ", ".join(map(str, value)))
                value = value[0]
            out[f"profile.{profile}.{knob.name}"] = value
        elif param is None and not any(k.profile == profile and k.flags == knob.flags for k in knobs):
            owners = sorted({k.profile for k in knobs if k.flags == knob.flags})
            raise InputError.one("command line", None, knob.flags[0],
                                 f"a setting of the {' and '.join(owners)} profile"
                                 f"{'s' if len(owners) > 1 else ''}: add --profile {owners[0]}")
    return out


def rubric_flags(rubric: str | None) -> dict[str, Any]:
    """``--rubric ID`` or ``--rubric ID/vN`` as the settings they set."""
    if rubric is None or "/" not in rubric:
        return {"judge.rubric": rubric}
    family, _, version = rubric.partition("/")
    if not family or not re.fullmatch(r"v[1-9][0-9]*", version):
        raise InputError.one("command line", None, "--rubric", f"{rubric!r}: give a rubric id, or id/vN (claim_check/v4)")
    return {"judge.rubric": family, "judge.rubric_version": int(version[1:])}


def input_options(func: Any) -> Any:
    for option in reversed([
        click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file."),
        click.option("--golden", type=click.Path(path_type=Path), help="Golden set (JSONL or YAML)."),
        click.option("--traces", multiple=True, type=click.Path(path_type=Path), help="Traces JSONL (repeatable)."),
        click.option("--corpus", type=click.Path(path_type=Path), help="Corpus JSONL (chunk text, docs, ACL)."),
        click.option("--format", "fmt", type=RegistryChoice(format_choices), help="Input format (default: detected)."),
        click.option("--config-attribute", help="otel traces: the resource attribute naming the config "
                                                "(default service.version)."),
        click.option("--case-attribute", help="otel traces with --golden: the span attribute naming the case "
                                              "(default groundjudge.case_id)."),
        click.option("--k", "ks", multiple=True, type=click.IntRange(min=1), help="Cutoffs (repeatable; default 1 3 5 10)."),
        click.option("--out", type=click.Path(path_type=Path), help="Output folder (default runs/<timestamp>)."),
        click.option("--quiet", is_flag=True, help="Print nothing but errors."),
    ]):
        func = option(func)
    return func


@main.command(cls=ProfileKnobsCommand)
@input_options
@click.option("--qrels", type=click.Path(path_type=Path), help="TREC qrels file (with --run).")
@click.option("--run", "run_file", type=click.Path(path_type=Path), help="TREC run file (with --qrels).")
@click.option("--profile", type=RegistryChoice(profile_names),
              help="Also report in a replaced system's own terms (inputs in its format); its gate sets the exit code.")
@click.option("--live", multiple=True, type=click.Path(path_type=Path),
              help="wfgy-chunking: traces of the live index, for the shadow-vs-live recall gate.")
def metrics(config_path: Path | None, golden: Path | None, traces: tuple[Path, ...], corpus: Path | None,
            fmt: str | None, config_attribute: str | None, case_attribute: str | None, ks: tuple[int, ...], out: Path | None, quiet: bool, qrels: Path | None,
            run_file: Path | None, profile: str | None, live: tuple[Path, ...], **knobs: Any) -> None:
    """Deterministic metrics only (no model): writes metrics.json and report.md.

    With --profile, the profile's own knobs (listed below with the profile's name) apply too."""
    flags = {
        "inputs.golden": golden, "inputs.traces": traces, "inputs.corpus": corpus, "inputs.qrels": qrels,
        "inputs.run": run_file, "inputs.format": fmt, "inputs.live": live,
        "inputs.config_attribute": config_attribute, "inputs.case_attribute": case_attribute, "metrics.ks": ks, "output.out": out,
        **profile_flags(click.get_current_context(), profile)}
    if profile is None:
        from groundjudge.trec_config import trec_settings

        trec = trec_settings(config_path, flags)
        if trec is not None:  # TREC files alone: the same files, without building the settings models
            _trec_metrics(trec.qrels, trec.run, trec.ks, trec.out or default_out(), quiet)
            return
    from groundjudge import api

    config = api.resolve_config(config_path, flags)
    if profile:
        config = api.for_profile(config, profile)  # both halves read the inputs in the profile's format
    out_dir = config.output.out or default_out()
    api.check_outputs(out_dir)
    doc = api.compute_metrics(config)
    result = api.profile_report(config, profile) if profile else None
    print_summary(api.write_metrics_reports(doc, out_dir, result), quiet)
    if not quiet:
        if result is not None:
            click.echo(terminal(result.markdown, keep_newlines=True))
        click.echo(f"wrote {out_dir / 'metrics.json'} and {out_dir / 'report.md'}")
    if result is not None and result.passed is False:
        sys.exit(1)


def _trec_metrics(qrels: Path, run_file: Path, ks: tuple[int, ...], out_dir: Path, quiet: bool) -> None:
    """``metrics`` on TREC qrels and a run given alone, in the steps and with the errors of the
    general path: the output folder checked, the files read and evaluated, the reports written."""
    from groundjudge.report.trec_json import run_trec

    print_summary(run_trec(qrels, run_file, ks, out_dir), quiet)
    if not quiet:
        click.echo(f"wrote {out_dir / 'metrics.json'} and {out_dir / 'report.md'}")


@main.command(cls=ProfileKnobsCommand)
@input_options
@click.option("--judge-base-url", help="OpenAI-compatible base URL [env GROUNDJUDGE_BASE_URL]; unset: embedded judge.")
@click.option("--judge-model", help="Pinned judge model id [env GROUNDJUDGE_MODEL].")
@click.option("--rubric", help="Rubric id, e.g. claim_check or grounded_answer, or one version of it, e.g. "
                                 "claim_check/v4 (default: [judge] rubric and rubric_version).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Concurrent judge calls.")
@click.option("--smoke", is_flag=True, default=None, help="Judge a stratified sample per tag only.")
@click.option("--max-cases", type=click.IntRange(min=0), help="Judge at most this many cases.")
@click.option("--max-tokens", type=click.IntRange(min=0), help="Stop sending once this many tokens are spent.")
@click.option("--max-cost-usd", type=click.FloatRange(min=0), help="Stop sending once this much is spent.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Judge cache folder [env GROUNDJUDGE_CACHE_DIR].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the judge cache.")
@click.option("--junit", type=click.Path(path_type=Path), help="Also write JUnit XML (one test case per gate).")
@click.option("--labels", multiple=True, type=click.Path(path_type=Path),
              help="Human labels JSONL (repeatable): judge rates are also reported bias-corrected (PPI).")
@click.option("--keep-errors", is_flag=True,
              help="Do not ask again a case whose cached replies were invalid (default: ask again).")
@click.option("--profile", type=RegistryChoice(profile_names),
              help="Also report in a replaced system's own terms (inputs in its format); a failed gate of its own "
                   "fails the run too.")
@click.option("--live", multiple=True, type=click.Path(path_type=Path),
              help="wfgy-chunking: traces of the live index, for the shadow-vs-live recall gate.")
@click.option("--history", "history_file", type=click.Path(path_type=Path),
              help="Run history to append to (default: history.sqlite beside the run folder).")
@click.option("--no-history", is_flag=True, help="Do not append this run to the run history.")
@click.option("--batch", is_flag=True,
              help="Judge through the OpenAI Batch API: submit, exit 4; run again (or `batch collect`) to finish.")
@click.option("--batch-wait", type=click.FloatRange(min=0), default=0, show_default=True,
              help="With --batch: poll (with backoff) up to this many seconds before exiting 4.")
@click.option("--from-phoenix", metavar="URL",
              help="Grade the spans of a Phoenix project (with --project) and write the verdicts back to it as span "
                   "annotations (needs groundjudge[phoenix]).")
@click.option("--project", help="With --from-phoenix: the Phoenix project's name.")
@click.option("--since", help="With --from-phoenix: only spans started within this long, such as 24h, 30m, 7d.")
@click.option("--otel-events", type=click.Path(path_type=Path),
              help="Also write each verdict as an OpenTelemetry gen_ai.evaluation.result event linked to its span "
                   "(OTLP JSON Lines; traces read in the otel format).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where the metric batches and the judge's cache lookup run: this process, or a Ray cluster "
                   "(needs groundjudge[ray]).")
@click.option("--ray-address", metavar="ADDRESS",
              help="With --engine ray: the cluster to connect to, as for ray.init(address=...) [env RAY_ADDRESS]; "
                   "unset: a local Ray on 127.0.0.1 for this run.")
def run(config_path: Path | None, golden: Path | None, traces: tuple[Path, ...], corpus: Path | None,
        fmt: str | None, config_attribute: str | None, case_attribute: str | None, ks: tuple[int, ...], out: Path | None, quiet: bool, judge_base_url: str | None, judge_model: str | None,
        rubric: str | None, concurrency: int | None, smoke: bool | None, max_cases: int | None, max_tokens: int | None,
        max_cost_usd: float | None, cache_dir: Path | None, no_cache: bool, junit: Path | None,
        labels: tuple[Path, ...], keep_errors: bool, profile: str | None, live: tuple[Path, ...],
        history_file: Path | None, no_history: bool, batch: bool, batch_wait: float, from_phoenix: str | None,
        project: str | None, since: str | None, otel_events: Path | None, engine: str, ray_address: str | None,
        **knobs: Any) -> None:
    """Metrics, then the judge on the cases that need it, then gates and reports.

    With --profile, the profile's own knobs (listed below with the profile's name) apply too."""
    from groundjudge import api

    if ray_address and engine != "ray":
        raise InputError.one("command line", None, "--ray-address", "only with --engine ray")
    if from_phoenix:
        if not project or traces:
            raise InputError.one("command line", None, "--from-phoenix",
                                 "give --project NAME (and no --traces: the project's spans are the traces)")
        out = out or default_out()
        api.check_outputs(out)
        spans_file = out / "phoenix-spans.jsonl"
        count = api.fetch_phoenix(from_phoenix, project, spans_file, since)
        if not quiet:
            click.echo(f"read {count} spans of Phoenix project {project!r} into {spans_file}")
        traces, fmt = (spans_file,), "otel"
    elif project or since:
        raise InputError.one("command line", None, "--project" if project else "--since", "only with --from-phoenix")
    config = api.resolve_config(config_path, {
        "inputs.golden": golden, "inputs.traces": traces, "inputs.corpus": corpus, "inputs.format": fmt,
        "inputs.labels": labels, "inputs.live": live, "metrics.ks": ks, "output.out": out,
        "inputs.config_attribute": config_attribute, "inputs.case_attribute": case_attribute,
        "judge.base_url": judge_base_url,
        "judge.model": judge_model, **rubric_flags(rubric), "judge.concurrency": concurrency, "judge.smoke": smoke,
        "judge.max_cases": max_cases, "judge.max_tokens": max_tokens, "judge.max_cost_usd": max_cost_usd,
        "judge.retry_errors": False if keep_errors else None, "cache.dir": cache_dir,
        "cache.enabled": False if no_cache else None, "output.history": history_file,
        "output.keep_history": False if no_history else None, **profile_flags(click.get_current_context(), profile)})
    if engine == "ray":
        from groundjudge.distributed import ray_engine

        with ray_engine(ray_address) as session:
            try:
                run_and_report(config, config.output.out or default_out(), quiet=quiet, junit=junit, batch=batch,
                               batch_wait=batch_wait, profile=profile, otel_events=otel_events,
                               phoenix=from_phoenix)
            finally:
                if not quiet:
                    for stage, nodes in session.nodes.items():
                        click.echo(f"ray: {stage} ran on {len(nodes)} node(s) of {session.address}", err=True)
        return
    run_and_report(config, config.output.out or default_out(), quiet=quiet, junit=junit, batch=batch,
                   batch_wait=batch_wait, profile=profile, otel_events=otel_events, phoenix=from_phoenix)


RUN_GC_THRESHOLDS = (100_000, 50, 1000)  # the collector's thresholds over a run (``_run_and_report``)


def run_and_report(config: Any, out_dir: Path, **options: Any) -> None:
    """A run and its reports, with Python's collector as it was afterwards, however it ends
    (the run raises its thresholds before loading and freezes the loaded inputs: ``_run_and_report``);
    a caller that froze objects of its own keeps them frozen, and the run freezes nothing."""
    thresholds, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    try:
        _run_and_report(config, out_dir, freeze=frozen_before == 0, **options)
    finally:
        if frozen_before == 0:
            gc.unfreeze()
        gc.set_threshold(*thresholds)


def _run_and_report(config: Any, out_dir: Path, *, freeze: bool, quiet: bool, junit: Path | None,
                    batch: bool = False, batch_wait: float = 0.0, profile: str | None = None,
                    otel_events: Path | None = None, phoenix: str | None = None) -> None:
    from groundjudge import api
    from groundjudge.progress import JudgeProgress

    # The run makes a record per case, trace and chunk that lives as long as it does: at the
    # default thresholds the collector would walk them again and again while they are made
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    if profile:
        config = api.for_profile(config, profile)  # its format, and the rubric version its report needs
    pinned = api.rubric_for(config)  # a missing or edited rubric is reported before anything runs
    api.check_gate_config(config, pinned)  # so is a gate that could not be evaluated
    dataset = api.load_inputs(config)  # so are bad inputs: nothing starts, nothing is written
    # and a run folder, JUnit file or history the reports could not be written to
    api.check_outputs(out_dir, junit, api.history_path(config, out_dir), otel_events)
    own = api.profile_report(config, profile) if profile else None
    # The inputs live as long as the run: the cyclic collector need not walk them again
    if freeze:
        gc.freeze()
    with api.open_judge(config, rubric=pinned, quiet=quiet) as judge, \
            api.open_escalation(config, quiet=quiet) as escalate:
        spent = None
        if batch:
            from groundjudge.judge.batch import BatchError

            try:
                step = api.batch_step(config, judge, out_dir, dataset=dataset, wait_s=batch_wait)
            except BatchError as exc:
                click.echo(f"error: batch: {terminal(exc)}", err=True)
                sys.exit(EXIT_JUDGE_UNREACHABLE)
            if step.kind != "done":
                click.echo(f"{terminal(step.message)}. The batch id is in {out_dir / 'batch' / 'state.json'}; "
                           f"finish with `groundjudge batch collect {out_dir}` (exit code {EXIT_BATCH_PENDING}: not "
                           "finished yet).", err=True)
                sys.exit(EXIT_BATCH_PENDING)
            if step.state.batches and not quiet:
                click.echo(f"batch: {terminal(step.message)}")
            spent = step.state.usage
            # The batches already asked again what earlier runs left invalid; what is still
            # invalid now stays judge_error rather than being asked a third time, live.
            config = config.model_copy(update={"judge": config.judge.model_copy(update={"retry_errors": False})})
            judge.config = config
        with JudgeProgress(quiet) as progress:
            result = api.run_eval(config, judge, progress=progress, dataset=dataset, escalate=escalate, spent=spent)
    if own is not None:
        own = api.profile_report(config, own.name, result)  # again, with what the judge found
    doc = api.write_run_reports(result, out_dir, junit=junit, profile=own, history=api.history_path(config, out_dir))
    if otel_events is not None:
        written, unlinked = api.write_otel_events(result, doc, otel_events,
                                                  report_url=(out_dir / "report.html").resolve().as_uri())
        if not quiet or unlinked:
            click.echo(f"wrote {written} gen_ai.evaluation.result events to {otel_events}"
                       + (f"; {unlinked} judged cases have no span to link to (their traces did not come from "
                          "OpenTelemetry)" if unlinked else ""), err=bool(unlinked))
    if phoenix is not None:
        written = api.annotate_phoenix(result, doc, phoenix, report_url=(out_dir / "report.html").resolve().as_uri())
        if not quiet:
            click.echo(f"wrote {written} span annotations to Phoenix at {redact_url(phoenix)}")
    print_summary(doc, quiet)
    if not quiet:
        t = result.judge.totals
        click.echo(f"judge: {t.done} done, {t.cache_hits} from cache, {t.judge_errors} judge_error, "
                   f"{t.usage.requests} requests, {t.usage.tokens_text()}")
        gates = result.gates
        click.echo("verdict: " + ("PASS" if gates.passed else "FAIL: " + terminal("; ".join(gates.failed))))
        click.echo(f"wrote {out_dir / 'report.json'}, cases.parquet, report.md, report.html and triage.md")
        if own is not None:
            click.echo(f"profile {own.name}: "
                       + (own.status or {True: "PASS", False: "FAIL", None: "no gate of its own"}[own.passed]))
    if result.judge_stopped:
        click.echo(f"judge stopped: {terminal(result.judge_stopped)} (exit code {EXIT_JUDGE_UNREACHABLE}: the verdict "
                   "is unknown; the run is kept in the history but compared with nothing)", err=True)
    cache_state = result.judge.cache
    if cache_state.get("problem"):
        click.echo(f"warning: {terminal(cache_state['problem'])}", err=True)
    if cache_state.get("legacy_entries_skipped"):
        click.echo(f"note: {cache_state['legacy_entries_skipped']} judge cache entries in the format of groundjudge "
                   "before 0.3 (pickles) were not read; `groundjudge cache migrate` converts them", err=True)
    code = 1 if result.exit_code == 0 and own is not None and own.passed is False else result.exit_code
    sys.exit(code)


@main.group()
def batch() -> None:
    """Batch runs: status of a run's batches, or collect them and finish the run."""


@batch.command("status")
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
def batch_status(run_dir: Path) -> None:
    """Ask the endpoint where the run's open batch stands (nothing is collected)."""
    from groundjudge import api
    from groundjudge.judge.batch import BatchEndpoint, BatchError, load_state, state_config

    state = load_state(run_dir)
    if state is None:
        raise InputError.one(run_dir / "batch" / "state.json", None, None, "no batch was submitted for this run")
    config = state_config(run_dir, state)  # a URL stored redacted is asked for again
    with api.open_judge(config, quiet=True) as judge:
        for record in state.batches:
            line = f"{terminal(record.id)}: {len(record.lines)} requests, "
            if record.collected:
                click.echo(line + f"collected ({terminal(record.status)}): {record.stored} stored, "
                           f"{len(record.failed)} failed")
                continue
            if judge.base_url is None:
                raise InputError.one(run_dir, None, "judge.base_url", "the run has no judge base URL")
            endpoint = BatchEndpoint(judge.base_url, judge.settings.api_key)
            try:
                found = endpoint.retrieve(record.id)
            except BatchError as exc:
                click.echo(f"error: batch: {terminal(exc)}", err=True)
                sys.exit(EXIT_JUDGE_UNREACHABLE)
            finally:
                endpoint.close()
            counts = found.request_counts
            click.echo(line + terminal(found.status)
                       + (f" ({counts.completed} done, {counts.failed} failed)" if counts else ""))


@batch.command("collect")
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Poll (with backoff) up to this many seconds for the batch to end.")
@click.option("--junit", type=click.Path(path_type=Path), help="Also write JUnit XML.")
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def batch_collect(run_dir: Path, wait: float, junit: Path | None, quiet: bool) -> None:
    """Poll the run's batch; when it has ended, store its replies, submit repairs if any, and
    finish the run in RUN_DIR (exit 4 while a batch is still running)."""
    from groundjudge.judge.batch import load_state, state_config

    state = load_state(run_dir)
    if state is None:
        raise InputError.one(run_dir / "batch" / "state.json", None, None, "no batch was submitted for this run")
    run_and_report(state_config(run_dir, state), run_dir, quiet=quiet, junit=junit, batch=True,
                   batch_wait=wait)


@main.command()
@click.option("--history", "history_file", type=click.Path(path_type=Path),
              help="Run history (default: [output] history, else runs/history.sqlite).")
@click.option("--metric", "metrics", multiple=True, help="Metric to show (repeatable; default: headline metrics).")
@click.option("--config", "config_id", help="Only this system config (as in triage).")
@click.option("--settings", "config_path", type=click.Path(path_type=Path),
              help="TOML config file, for its [output] history.")
@click.option("--last", type=click.IntRange(min=1), default=20, show_default=True, help="Runs to show.")
@click.option("--json", "as_json", is_flag=True, help="Print the points as JSON lines.")
@click.option("--fail-on-drop", is_flag=True, help="Exit 1 when the newest run has a real drop.")
def history(config_path: Path | None, history_file: Path | None, metrics: tuple[str, ...], config_id: str | None,
            last: int, as_json: bool, fail_on_drop: bool) -> None:
    """Trends over past runs: each run against the previous comparable one, real drops flagged."""
    import sqlite3

    from groundjudge import api
    from groundjudge.history import HistoryStore, default_metrics, trend
    from groundjudge.report.numbers import number

    config = api.resolve_config(config_path, {"output.history": history_file})
    path = config.output.history or Path("runs") / "history.sqlite"
    store = HistoryStore(path)
    try:
        runs = store.runs(last)
    except (sqlite3.DatabaseError, OSError, ValueError) as exc:
        raise StorageError(f"{path}: the run history cannot be read ({exc}); move it aside (mv {path} "
                           f"{path}.broken) to start a new one") from None
    if not path.exists() or not runs:
        raise InputError.one(path, None, "history", "no runs recorded here yet")
    newest = runs[-1]
    configs = [config_id] if config_id else sorted({c for r in runs for c in r.summary.configs})
    points = []
    for cfg in configs:
        if not any(cfg in r.summary.configs for r in runs):
            raise InputError.one(path, None, "config", f"no runs of config {cfg!r}")
        holder = next(r for r in reversed(runs) if cfg in r.summary.configs)
        points += trend(store, list(metrics) or default_metrics(holder, cfg), config=cfg, last=last)
    if as_json:
        for p in points:
            click.echo(json.dumps(p.as_dict()))  # ASCII: every control character \u-escaped
    else:
        by_run = {r.id: r for r in runs}
        for cfg in configs:
            for metric in dict.fromkeys(p.metric for p in points if p.config == cfg):
                click.echo(f"\n{terminal(cfg)} · {terminal(metric)}")
                click.echo(f"{'run':>5}  {'started':20}  {'golden':8}  {'rubric':8}  {'value':>8}  {'n':>6}  "
                           f"{'delta':>8}  {'p':>7}  status")
                for p in (p for p in points if p.config == cfg and p.metric == metric):
                    s = by_run[p.run_id].summary
                    mark = ("DROP (real)" if p.drop else f"{p.verdict}" if p.verdict else p.status)
                    if p.status == "break":
                        mark = f"BREAK: {p.note}" + (f"; {'DROP (real)' if p.drop else p.verdict}" if p.verdict else "")
                    delta = f"{p.delta:+.4f}" if p.delta is not None else "–"
                    click.echo(f"{p.run_id:>5}  {s.started_at:20}  {(s.golden_hash or '–')[:8]:8}  "
                               f"{(s.rubric_hash or '–')[:8]:8}  {number(p.value, 4):>8}  {p.n:>6}  {delta:>8}  "
                               f"{number(p.p_value, 4):>7}  {terminal(mark)}")
    for run_ in runs:
        if not run_.summary.comparable:
            why = terminal(run_.summary.not_comparable or "")
            click.echo(f"run {run_.id} ({terminal(run_.summary.started_at)}) is not comparable: {why}", err=True)
    drops = [p for p in points if p.drop and p.run_id == newest.id]
    if drops:
        click.echo("real drops in the newest run: " + terminal(", ".join(f"{p.config}:{p.metric}" for p in drops)),
                   err=True)
        if fail_on_drop:
            sys.exit(1)


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--report", "report_path", type=click.Path(path_type=Path), help="A `groundjudge run` report.json.")
@click.option("--verdicts", type=click.Path(path_type=Path), help="Another judge's verdicts (JSONL).")
@click.option("--judge-name", help="With --verdicts: the other judge's model id, for its record.")
@click.option("--labels", multiple=True, type=click.Path(path_type=Path), help="Human labels JSONL (repeatable).")
@click.option("--primary-rater", help="Rater the judge is compared with (default: the one with most labels).")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--target-width", type=float, default=0.2, show_default=True, help="Wanted CI width for kappa.")
@click.option("--records-dir", type=click.Path(path_type=Path), help="Where records go (default calibration/records).")
@click.option("--position-probe", is_flag=True,
              help="Also re-judge the labelled cases with the context order reversed and report the flip rate.")
@click.option("--judge-base-url", help="For --position-probe: the judge (unset: the embedded judge).")
@click.option("--judge-model", help="For --position-probe: the pinned judge model id.")
@click.option("--rubric", help="For --position-probe: the rubric id (default: [judge] rubric).")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="For --position-probe: the judge cache.")
@click.option("--stability", "stability", metavar="N",
              help="Also re-ask a seeded sample of the report's questions N times each (N >= 2), bypassing the "
                   "cache, and record each criterion's flip rate and noise band.")
@click.option("--stability-sample", metavar="SIZE", default="40", show_default=True,
              help="With --stability: how many questions to re-ask (seeded by --seed).")
def calibrate(config_path: Path | None, report_path: Path | None, verdicts: Path | None, judge_name: str | None,
              labels: tuple[Path, ...], primary_rater: str | None, seed: int, target_width: float,
              records_dir: Path | None, position_probe: bool, judge_base_url: str | None,
              judge_model: str | None, rubric: str | None, cache_dir: Path | None, stability: str | None = None,
              stability_sample: str = "40") -> None:
    """Compare judge verdicts with human labels; write a calibration record; show trust."""
    from groundjudge import api
    from groundjudge.progress import JudgeProgress

    config = api.resolve_config(config_path, {"inputs.labels": labels, "trust.records_dir": records_dir,
                                              "judge.base_url": judge_base_url, "judge.model": judge_model,
                                              **rubric_flags(rubric), "cache.dir": cache_dir})
    repeats = _count(stability, "stability", 2) if stability is not None else None
    size = _count(stability_sample, "stability-sample", 1)
    if repeats is not None and (report_path is None or not config.inputs.labels):  # before any call
        raise InputError.one(config.source or "command line", None, "stability",
                             "needs --report and --labels (the figures go into the calibration record)")
    probe = None
    if position_probe:
        if report_path is None:
            raise InputError.one(config.source or "command line", None, "position-probe", "needs --report")
        with api.open_judge(config) as judge, JudgeProgress(False) as progress:
            probe = api.position_probe(config, report_path, judge, progress=progress)
    stable = _stability(config, report_path, repeats, size, seed) if repeats is not None and report_path else None
    done = api.calibrate(config, report_path=report_path, verdicts_path=verdicts, judge_name=judge_name,
                         primary_rater=primary_rater, seed=seed, target_width=target_width, position_probe=probe,
                         stability=stable)
    print_calibration(done.record, done.trust, written=str(done.path))
    if probe is not None:
        click.echo("position probe (context order reversed): " + ", ".join(
            f"{c}: {p['flips']}/{p['n']} flipped" for c, p in probe.items() if isinstance(p, dict)))
    for line in done.notes:  # what was written, what else exists for this judge, which record decides
        click.echo(line)
    if stable is not None:
        for line in stability_lines(stable):
            click.echo(line)


def _count(value: str, option: str, least: int) -> int:
    """A whole number >= ``least`` given on the command line, else one input-error line (exit 2)."""
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or number < least:
        raise InputError.one("command line", None, option, f"{value!r} is not a whole number >= {least}")
    return number


def _stability(config: Any, report_path: Path, repeats: int, size: int, seed: int) -> dict[str, Any]:
    """``calibrate --stability N``: the budget line, then the re-asks; the record's block."""
    from groundjudge import api
    from groundjudge.calibrate.reask import describe

    with api.open_judge(config) as judge:
        planned = api.stability_plan(config, report_path, judge, size=size, seed=seed)
        click.echo(describe(planned, repeats, judge.model), err=True)  # the budget, before any call

        def tick(done: int, total: int) -> None:
            if done % 10 == 0 or done == total:
                click.echo(f"stability: {done}/{total} call(s) made", err=True)

        return api.stability_reask(judge, planned, repeats, on_call=tick)


def stability_lines(block: dict[str, Any]) -> list[str]:
    """One line per criterion: flip rate, spreads, noise band."""
    out = [(f"stability: {block['calls']} call(s) ({block['failed_calls']} failed) in {block['seconds']:.0f}s, "
            f"{block['sample']} of {block['questions_available']} question(s) x {block['repeats']}")]
    for name, c in block["criteria"].items():
        band = c["band"]
        out.append(f"  {name}: {c['flipped']}/{c['questions']} flipped" + (
            "" if band is None else
            f", support spread max {_num(c['support_spread']['max'])} (P(yes) {_num(c['p_yes_spread']['max'])}), "
            f"noise band [{_num(band['low'])}, {_num(band['high'])}) around {c['cut']:g}"))
    for name, why in (block.get("not_covered") or {}).items():
        out.append(f"  {name}: no figures: {why}")
    return out


def print_calibration(record: dict[str, Any], trust: dict[str, Any], *, written: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from groundjudge.calibrate.trust import DECIDED_BY

    def verdict(status: Any) -> str:  # the lines below the table name the deciding record
        short: str = status.reason.split(DECIDED_BY, 1)[0]
        return short if status.record in (None, written) else short + " (another record decides: below)"

    table = Table(title=Text(terminal(f"judge vs {record['primary_rater']} ({record['judge']['model']})")))
    for col in ("criterion", "n", "agreement", "kappa", "95% CI", "human~human kappa", "trust"):
        table.add_column(col)
    for criterion, stats in record["criteria"].items():
        s = stats["judge_vs_human"]
        inter = next(iter(stats["inter_rater"].values()), None)
        table.add_row(
            Text(terminal(criterion)), str(s["n"]), _num(s["observed"]), _num(s["kappa"]),
            Text(f"[{_num(s['ci_low'])}, {_num(s['ci_high'])}]"),
            f"{_num(inter['kappa'])} (n={inter['n']})" if inter else "–", Text(terminal(verdict(trust[criterion]))))
    Console(highlight=False).print(table)
    for criterion, stats in record["criteria"].items():
        block = stats.get("selective")
        if block:
            kt = block["kappa_threshold"]  # None for an ordinal criterion: no P(True) to threshold
            threshold = ("" if kt is None else f"; kappa-maximising threshold {_num(kt['threshold'])} (cross-fitted "
                                               f"kappa {_num(kt['cross_fitted_kappa'])})")
            click.echo(f"{criterion}: selective trust (target {block['target_agreement']:g}, risk {block['risk']:g}): "
                       f"{block['cutoff']['reason']}; ECE {_num(block['reliability']['ece'])}{threshold}")
    print_review(record)


def print_review(record: dict[str, Any]) -> None:
    """Per reviewed criterion, its disagreements by cause and direction (``calibrate.review``),
    and how often people agreed where a term rule's signal failed an answer."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    for criterion, stats in record["criteria"].items():
        review = stats.get("review")
        if not review:
            continue
        table = Table(title=Text(terminal(f"{criterion}: {review['disagreements']} disagreements by cause")))
        for col in ("cause", "judge too strict", "judge too lenient"):
            table.add_column(col)
        for key, cause in review["causes"].items():
            if cause["n"]:
                table.add_row(Text(terminal(key)), str(cause["too_strict"]), str(cause["too_lenient"]))
        Console(highlight=False).print(table)
        flags = [f"{key} {t['judge_false']} (people agreed on {t['human_false']})"
                 for key, t in review["flag_agreement"].items() if t["judge_false"]]
        if flags:
            click.echo(terminal(f"{criterion}: answers the judge failed, by the same rules: " + "; ".join(flags)))


def _num(value: float | None) -> str:
    from groundjudge.report.numbers import number

    return number(value, 3)


@main.command()
@click.argument("run_a", type=click.Path(path_type=Path, exists=True))
@click.argument("run_b", required=False, type=click.Path(path_type=Path, exists=True))
@click.option("--config-a", help="Config of A to compare (default: its first).")
@click.option("--config-b", help="Config of B to compare (default: its first; with one run, its second).")
@click.option("--strict-chunker-version", is_flag=True, help="Refuse when chunker versions differ.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the permutation test.")
@click.option("--out", type=click.Path(path_type=Path), help="Write compare.json and compare.md here.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a metric got worse for real (an untrusted judge's metrics excepted).")
def compare(run_a: Path, run_b: Path | None, config_a: str | None, config_b: str | None,
            strict_chunker_version: bool, seed: int, out: Path | None, fail_on_regression: bool) -> None:
    """Compare two runs (RUN_A RUN_B), or two configs of one run: deltas, significance, win/loss."""
    from groundjudge import api
    from groundjudge.files import write_json_atomic, write_text_atomic
    from groundjudge.report.compare import render_compare_markdown
    from groundjudge.report.markdown import HEADLINE

    if out is not None:
        api.check_outputs(out)
    result = api.compare(run_a, run_b, config_a=config_a, config_b=config_b,
                         strict_chunker_version=strict_chunker_version, seed=seed)
    names = [m for m in HEADLINE if m in result["metrics"]]
    names += [m for m in ("hit_span@5", "recall_span@10") if m in result["metrics"]]
    text = render_compare_markdown(result, names)
    if out is not None:
        write_json_atomic(out / "compare.json", result)
        write_text_atomic(out / "compare.md", text)
    click.echo(terminal(text, keep_newlines=True))
    if fail_on_regression and result["regressions"]:
        sys.exit(1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--tag", "tags", multiple=True, help="Only cases with this tag (repeatable).")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(["unsupported_claim", "contradicted_claim", "misattributed_citation",
                                 "invalid_citation", "awaits_person", "unstable_verdict"]),
              help="Only findings of this kind (repeatable); awaits_person: the human queue; unstable_verdict: "
                   "verdicts inside their noise band.")
@click.option("--config", "configs", multiple=True, help="Only this system config (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSONL instead of Markdown.")
def triage(run_dir: Path, tags: tuple[str, ...], kinds: tuple[str, ...], configs: tuple[str, ...],
           as_json: bool) -> None:
    """Show a run's unsupported claims and bad citations, filtered."""
    from groundjudge.report.triage import filter_records, read_triage_jsonl, render_triage_markdown, to_jsonl

    records = read_triage_jsonl(run_dir / "triage.jsonl")
    chosen = filter_records(records, tags=tags, kinds=kinds, configs=configs)
    shown = to_jsonl(chosen) if as_json else render_triage_markdown(chosen)
    click.echo(terminal_json(shown) if as_json else terminal(shown, keep_newlines=True), nl=False)


@main.group()
def cache() -> None:
    """Show, prune or clear the judge cache."""


def _open_cache(config_path: Path | None, cache_dir: Path | None) -> Any:
    from groundjudge import api
    from groundjudge.judge.cache import JudgeCache

    config = api.resolve_config(config_path, {"cache.dir": cache_dir})
    return JudgeCache(config.cache.dir)


cache_options = [click.option("--config", "config_path", type=click.Path(path_type=Path)),
                 click.option("--cache-dir", type=click.Path(path_type=Path))]


def _with_cache_options(func: Any) -> Any:
    for option in reversed(cache_options):
        func = option(func)
    return func


@cache.command("stats")
@_with_cache_options
def cache_stats(config_path: Path | None, cache_dir: Path | None) -> None:
    """Entries and size of the judge cache."""
    c = _open_cache(config_path, cache_dir)
    stats = c.stats()
    c.close()
    click.echo(f"{stats['directory']}: {stats['entries']} entries, {stats['size_bytes']} bytes")
    if stats.get("problem"):
        click.echo(f"warning: {stats['problem']}", err=True)


@cache.command("prune")
@_with_cache_options
@click.option("--older-than-days", type=click.FloatRange(min=0), required=True)
def cache_prune(config_path: Path | None, cache_dir: Path | None, older_than_days: float) -> None:
    """Drop replies stored more than N days ago."""
    c = _open_cache(config_path, cache_dir)
    removed = c.prune(older_than_days)
    c.close()
    click.echo(f"removed {removed} entries")


@cache.command("migrate")
@_with_cache_options
def cache_migrate(config_path: Path | None, cache_dir: Path | None) -> None:
    """Convert replies cached by groundjudge before 0.3 (pickles) to JSON, reading them as plain
    data only (nothing in them can run); entries that are not plain cached replies are dropped."""
    from groundjudge import api
    from groundjudge.judge.cache_disk import migrate

    config = api.resolve_config(config_path, {"cache.dir": cache_dir})
    converted, dropped = migrate(config.cache.dir)
    click.echo(f"{config.cache.dir}: {converted} entries converted to JSON, {dropped} dropped unread")


@cache.command("clear")
@_with_cache_options
@click.confirmation_option(prompt="Delete every cached judge reply?")
def cache_clear(config_path: Path | None, cache_dir: Path | None) -> None:
    """Delete every cached reply (the next run pays for every call again)."""
    c = _open_cache(config_path, cache_dir)
    removed = c.clear()
    c.close()
    click.echo(f"removed {removed} entries")


@main.group()
def rubrics() -> None:
    """List, show and lock (publish) rubric versions."""


def _rubrics_dir(path: Path | None) -> Path:
    """``--dir``, else ``./rubrics``, else the rubrics installed with the package."""
    if path is not None:
        return path
    if Path("rubrics").is_dir():
        return Path("rubrics")
    from importlib import resources

    return Path(str(resources.files("groundjudge") / "rubrics"))


@rubrics.command("list")
@click.option("--dir", "rubrics_dir", type=click.Path(path_type=Path))
def rubrics_list(rubrics_dir: Path | None) -> None:
    """Every rubric version and whether it is published (locked) and intact."""
    from groundjudge.judge.rubric import parse_rubric_file, read_lock, rubric_files

    folder = _rubrics_dir(rubrics_dir)
    lock = read_lock(folder)
    for path in rubric_files(folder):
        r = parse_rubric_file(path)
        state = ("published" if lock[r.key] == r.content_hash else "EDITED after publishing") if r.key in lock \
            else "draft (not locked)"
        click.echo(f"{r.key}  {r.content_hash[:12]}  {state}{'  opt-in (only when named)' if r.opt_in else ''}  {path}")


@rubrics.command("show")
@click.argument("rubric_id")
@click.option("--version", type=int)
@click.option("--dir", "rubrics_dir", type=click.Path(path_type=Path))
def rubrics_show(rubric_id: str, version: int | None, rubrics_dir: Path | None) -> None:
    """Print a rubric (checked against the lock file)."""
    from groundjudge.judge.rubric import load_rubric

    r = load_rubric(_rubrics_dir(rubrics_dir), rubric_id, version)
    click.echo(terminal_json(json.dumps({**r.model_dump(mode="json"), "hash": r.content_hash}, indent=2,
                                        ensure_ascii=False)))


@rubrics.command("lock")
@click.option("--dir", "rubrics_dir", type=click.Path(path_type=Path))
def rubrics_lock(rubrics_dir: Path | None) -> None:
    """Publish every new rubric version by pinning its hash; edited published versions are refused."""
    from groundjudge.judge.rubric import lock_rubrics

    _, added = lock_rubrics(_rubrics_dir(rubrics_dir))
    click.echo("locked: " + (", ".join(added) if added else "nothing new"))


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--port", type=click.IntRange(0, 65535), help="Port on 127.0.0.1 (default: a free one).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads (default: every core).")
@click.option("--context-size", type=click.IntRange(min=512), help="Context window in tokens.")
def serve(config_path: Path | None, port: int | None, threads: int | None, context_size: int | None) -> None:
    """Keep the embedded judge running across runs, until Ctrl-C."""
    import time

    from groundjudge import api
    from groundjudge.judge.local import LocalJudge, LocalJudgeError

    config = api.resolve_config(config_path, {"local.port": port, "local.threads": threads,
                                              "local.context_size": context_size})
    try:
        with LocalJudge.from_config(config, log=sys.stderr) as local:
            click.echo(f"export GROUNDJUDGE_BASE_URL={local.base_url}")
            click.echo(f"export GROUNDJUDGE_MODEL={local.model_id}")
            click.echo("serving; Ctrl-C stops it", err=True)
            while local.process is not None and local.process.poll() is None:
                time.sleep(1)
            raise JudgeUnavailable(f"the server exited with code {local.process.returncode if local.process else '?'}")
    except LocalJudgeError as exc:
        raise JudgeUnavailable(str(exc)) from exc


SCHEMAS = ("golden", "trace", "corpus", "labels", "metrics", "report")


@main.command()
@click.argument("name", type=click.Choice(SCHEMAS))
def schema(name: str) -> None:
    """Print the JSON Schema of an input contract, or of metrics.json / report.json."""
    from groundjudge.contracts import input_schema

    if name in ("metrics", "report"):
        from groundjudge.report.document import ReportDocument
        from groundjudge.report.metrics_document import MetricsDocument

        model = ReportDocument if name == "report" else MetricsDocument
        click.echo(json.dumps(model.model_json_schema(by_alias=True), indent=2))
        return
    click.echo(json.dumps(input_schema(name), indent=2))


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True))
@click.option("--rater", required=True, help="Your name as it goes into the labels file.")
@click.option("--labels", "labels_path", type=click.Path(path_type=Path),
              help="Your labels file (default calibration/labels/<rater>.jsonl); other raters' files beside it.")
@click.option("--strategy", type=click.Choice(["random", "stratified", "uncertain"]), default="uncertain",
              show_default=True, help="How items are weighted for picking.")
@click.option("--batch", "size", type=click.IntRange(min=1), default=20, show_default=True, help="Items per batch.")
@click.option("--double", "double_share", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Share of the batch taken from items another rater labelled.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draw.")
@click.option("--queue-first/--no-queue-first", default=True, show_default=True,
              help="Offer the run's human queue (items no trusted judge settled) before any sampled batch.")
@click.option("--serve", is_flag=True, help="Serve the labelling page on 127.0.0.1 until idle.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="With --serve: port (default: a free one).")
@click.option("--idle-minutes", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="With --serve: stop after this long without a request.")
def label(run_dir: Path, rater: str, labels_path: Path | None, strategy: str, size: int, double_share: float,
          seed: int, queue_first: bool, serve: bool, port: int, idle_minutes: float) -> None:
    """Pick items of a run for RATER to label (known selection probabilities), show the weighted
    kappa CI now and expected after the batch, and with --serve label them in the browser."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from groundjudge.label import prepare_batch
    from groundjudge.label.server import LabelApp
    from groundjudge.label.server import serve as serve_page

    plan = prepare_batch(run_dir, rater, labels_path=labels_path, strategy=strategy, size=size,
                         double_share=double_share, seed=seed, queue_first=queue_first)
    s = plan.session
    if plan.batch is None:
        click.echo(f"{terminal(rater)} has labelled every judged item of this run ({len(s.labelled)}).")
    else:
        done, total = s.current_batch_progress()
        how = ("resumed unfinished" if plan.resumed else "new (human queue)" if plan.batch.strategy == "queue"
               else f"new ({plan.batch.strategy}, seed {plan.batch.seed})")
        click.echo(f"batch {plan.batch.batch} for {terminal(rater)}: {how}, {done}/{total} labelled, "
                   f"{plan.doubles} also labelled by another rater; labels go to {terminal(str(s.labels_path))}")
    click.echo(terminal(plan.queue_note))
    click.echo(terminal(plan.confidence_note))
    # names from the run and the user are text, never rich markup or terminal controls
    table = Table(title=Text(terminal(f"judge vs {rater} (weighted by inverse inclusion probability)")))
    for col in ("criterion", "n", "kappa", "95% CI now", "half-width now", "expected half-width after batch"):
        table.add_column(col)
    for criterion, est in plan.current.items():
        expected = plan.expected_half_width.get(criterion)
        table.add_row(Text(terminal(criterion) + ("" if est.weighted or est.n == 0 else " (unweighted)")),
                      str(est.n), _num(est.kappa), Text(f"[{_num(est.ci_low)}, {_num(est.ci_high)}]"),
                      _num(est.half_width), _num(expected))
    Console(highlight=False).print(table)
    click.echo(terminal(plan.expected_note))
    if serve and plan.batch is not None:
        serve_page(LabelApp(s), port, idle_seconds=idle_minutes * 60,
                   ready=lambda url: click.echo(f"labelling page: {url} (Ctrl-C stops)", err=True))
        click.echo("labelling page stopped; every label given is in " + terminal(str(s.labels_path)), err=True)


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--report", "report_path", required=True, type=click.Path(path_type=Path),
              help="A `groundjudge run` report.json judged with the base rubric.")
@click.option("--labels", multiple=True, type=click.Path(path_type=Path), help="Human labels JSONL (repeatable).")
@click.option("--criterion", default="faithful", show_default=True, help="The claim-support criterion to fit.")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True,
              help="Cross-fitting folds, grouped by question.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the folds and the bootstrap.")
@click.option("--model", "model_kind", type=click.Choice(["logistic", "grounded"]), default="logistic",
              show_default=True, help="Claim model: monotone logistic over the signals, or the base rule refitted.")
@click.option("--rater", help="Rater whose labels are fitted (default: the one with most labels).")
@click.option("--out-dir", type=click.Path(path_type=Path), default=Path("rubrics"), show_default=True,
              help="Rubrics folder the derived rubric and its lock entry go to.")
@click.option("--name", help="Id of the derived rubric (default: <base id>_aligned).")
@click.option("--records-dir", type=click.Path(path_type=Path), help="Where its record goes (default calibration/records).")
@click.option("--demos", type=click.IntRange(min=2), default=None,
              help="Instead of fitting: try K worked examples from labelled claims in the system prompt (asks the "
                   "judge; needs the run's inputs in --config). Shows the budget; asks only with --yes.")
@click.option("--yes", "go", is_flag=True, help="With --demos: ask the judge after showing the budget.")
def align(config_path: Path | None, report_path: Path, labels: tuple[Path, ...], criterion: str, folds: int, seed: int,
          model_kind: str, rater: str | None, out_dir: Path, name: str | None, records_dir: Path | None,
          demos: int | None, go: bool) -> None:
    """Fit a rubric's reading of its cached replies to human labels (no judge call); print its
    out-of-fold agreement beside the in-sample and base figures; write the derived rubric.
    With --demos, try worked examples instead (see docs/align.md)."""
    from groundjudge import api
    from groundjudge.calibrate import align as fitting

    config = api.resolve_config(config_path, {"inputs.labels": labels, "trust.records_dir": records_dir})
    if not config.inputs.labels:
        raise InputError.one(config.source or "command line", None, "labels", "give human labels with --labels")
    for path in [report_path, *config.inputs.labels]:
        if not Path(path).is_file():
            raise InputError.one(path, None, None, "file not found")
    _not_the_installed_rubrics(out_dir)
    if demos is not None:
        align_demos(config, report_path, demos, seed=seed, rater=rater, out_dir=out_dir, name=name, go=go)
        return
    done = fitting.run_alignment(report_path, list(config.inputs.labels), criterion=criterion, k=folds, seed=seed,
                                 model=model_kind, rater=rater)  # type: ignore[arg-type]
    base = fitting.base_rubric(done.labelled, _base_folders(config.judge.rubrics_dir, out_dir))
    rubric_id = name or f"{base.id}_aligned"
    if not re.fullmatch(r"[a-z0-9_]+", rubric_id):
        raise InputError.one("command line", None, "name", f"{rubric_id!r} is not a rubric id (a-z, 0-9, _)")
    others = fitting.fit_other_criteria(done, base, list(config.inputs.labels))
    derived = fitting.derived_rubric(base, done, rubric_id, fitting.next_version(out_dir, rubric_id), criterion,
                                     others)
    path = fitting.write_derived(derived, out_dir)
    _, record_path = fitting.oof_record(done, derived, list(config.inputs.labels), config.trust.records_dir, criterion,
                                        target_agreement=config.trust.target_agreement, risk=config.trust.risk)
    print_alignment(done, base.key, criterion)
    for other, fitted in others.items():
        kappa, low, high = fitted.oof
        cuts = fitted.fitted.cut_points if fitted.fitted.threshold is None else [fitted.fitted.threshold]
        click.echo(f"{terminal(other)}: {'cut points' if fitted.fitted.threshold is None else 'threshold'} "
                   f"{', '.join(f'{c:.4g}' for c in cuts or [])}; kappa out-of-fold {_num(kappa)} [{_num(low)}, "
                   f"{_num(high)}], in-sample {_num(fitted.in_sample)}, base {_num(fitted.base)} (n={fitted.n})")
    click.echo(f"wrote {terminal(str(path))} ({derived.key}, hash {derived.content_hash[:12]}, derived from "
               f"{base.key}); use it with --rubric {derived.id} and [judge] rubrics_dir = {terminal(str(out_dir))}")
    click.echo(f"wrote its out-of-fold calibration record {terminal(str(record_path))}")


def align_demos(config: Any, report_path: Path, k: int, *, seed: int, rater: str | None, out_dir: Path,
                name: str | None, go: bool) -> None:
    """``align --demos K``: the budget, then (with --yes) the trial, and the derived rubric only
    when the demonstrations were kept."""
    from groundjudge import api
    from groundjudge.calibrate import align as fitting
    from groundjudge.calibrate.align_data import sha256_file
    from groundjudge.calibrate.demos import demo_rubric
    from groundjudge.calibrate.verdicts import verdicts_from_report

    base = fitting.rubric_by_ref(verdicts_from_report(report_path).identity.rubric,
                                 _base_folders(config.judge.rubrics_dir, out_dir))
    rubric_id = name or f"{base.id}_demos"
    if not re.fullmatch(r"[a-z0-9_]+", rubric_id):
        raise InputError.one("command line", None, "name", f"{rubric_id!r} is not a rubric id (a-z, 0-9, _)")
    def show(planned: Any) -> None:
        click.echo(f"{k} demonstrations from {len({d.query_id for d in planned.demos})} questions "
                   f"({sum(1 for d in planned.demos if not d.supported)} unsupported); the trial: "
                   + terminal(planned.budget.line()))

    trial = api.try_demos(config, report_path, k, rubric=base, seed=seed, rater=rater, go=go, on_budget=show)
    if not go:
        click.echo("nothing asked: run again with --yes to ask the judge")
        return
    outcome = trial.outcome
    for error in trial.errors[:5]:
        click.echo(f"not judged: {terminal(error)}", err=True)
    click.echo(f"{outcome.items} answers to {outcome.questions} other questions: kappa without {_num(outcome.kappa_base)}, "
               f"with {_num(outcome.kappa_demos)} [{_num(outcome.ci_demos[0])}, {_num(outcome.ci_demos[1])}]; "
               f"gain [{_num(outcome.ci_gain[0])}, {_num(outcome.ci_gain[1])}]")
    if trial.errors:
        click.echo(f"{len(trial.errors)} answers could not be judged with the demonstrations: nothing kept; run again "
                   "to ask them (answers given so far are cached)")
        raise SystemExit(1)
    if not outcome.kept:
        click.echo(f"not kept: the gain does not exceed the half-width of the CI ({_num(outcome.half_width)}); "
                   "no rubric written")
        return
    derived = demo_rubric(base, trial.demos, outcome, name=rubric_id, version=fitting.next_version(out_dir, rubric_id),
                          labels_sha256=[sha256_file(Path(p)) for p in config.inputs.labels], seed=seed)
    path = fitting.write_derived(derived, out_dir)
    click.echo(f"kept: wrote {terminal(str(path))} ({derived.key}, hash {derived.content_hash[:12]}); its questions are "
               f"new, so run it over the labelled answers and align that report to fit its reading")


def _not_the_installed_rubrics(out_dir: Path) -> None:
    """A fitted rubric belongs to its team's rubrics folder, never to the installed package's
    (in a repository checkout ``rubrics`` links there): refused before anything is fitted."""
    from groundjudge.judge.rubric import packaged_rubrics

    with packaged_rubrics() as installed:
        if out_dir.resolve() == installed.resolve():
            raise InputError.one("command line", None, "out-dir",
                                 f"{out_dir} is the rubrics folder installed with groundjudge; give your own with --out-dir")


def _base_folders(configured: Path | None, out_dir: Path) -> list[Path]:
    from groundjudge.judge.rubric import packaged_rubrics

    with packaged_rubrics() as installed:
        return [d for d in (configured, out_dir, Path("rubrics")) if d is not None and d.is_dir()] + [installed]


def print_alignment(done: Any, base_key: str, criterion: str) -> None:
    """The out-of-fold figures with their CIs, the in-sample and base figures beside them, the
    fitted values and the learning curve."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(figures: Any, metric: str) -> str:
        f = figures.by_metric[metric]
        return f"{_num(f.value)} [{_num(f.ci_low)}, {_num(f.ci_high)}]"

    title = (f"{criterion}: aligned vs {base_key} on the same {done.oof.n} answers "
             f"({len({i.query_id for i in done.labelled.items})} questions, {done.k} folds by question, seed {done.seed})")
    table = Table(title=Text(terminal(title)))
    for col in ("figure", "aligned, out-of-fold (95% CI)", "aligned, in-sample", f"base {base_key}"):
        table.add_column(Text(terminal(col)))
    for metric in ("kappa", "balanced_accuracy", "auroc"):
        table.add_row(metric, cell(done.oof, metric), cell(done.in_sample, metric), cell(done.base, metric))
    Console(highlight=False).print(table)
    final = done.final
    model = final.claim_model
    values = (f"term_factor {model.term_factor}" if model.kind == "grounded" else
              f"intercept {model.intercept:.3f}, " + ", ".join(f"{k} {v:.3f}" for k, v in model.weights.items()))
    click.echo(f"fitted on {'claim labels (human spans)' if final.claim_labels else 'answer labels'}: "
               f"{model.kind} claim model ({values}); combine {final.combine}"
               + (f" (temperature {final.temperature:g})" if final.combine == "softmin" else "")
               + f"; threshold {final.threshold:.4f}")
    if done.curve:
        click.echo("learning curve (out-of-fold kappa by share of training questions): "
                   + ", ".join(f"{int(f * 100)}% {_num(k)}" for f, k in done.curve))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
