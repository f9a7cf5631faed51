"""The ``ldp-marginals`` command: run, simulate, client-config, produce, collect, calibrate, plan, compare, read, demo,
dashboard."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from ldp_marginals.pipelines import calibrate as calibrate_cmd
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS

# the demo's hourly windows must each hold min_reports=2000 reports of the smaller region (45%)
MIN_DEMO_REPORTS = 20_000

# the command's exit codes (run --help lists them)
EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING_COUNTED = 1, 2, 3
EXIT_CODES = {0: "done", EXIT_FAILED: "a run that started and could not finish (a full disk)",
              EXIT_USAGE: "an error found before anything ran (an option, a config, an input or output)",
              EXIT_NOTHING_COUNTED: "a run that read input and counted no report: every one was dead-lettered "
                                    "or every file damaged (the summary and the dead letters say why)",
              130: "stopped by Ctrl-C (SIGINT), 143 stopped by SIGTERM: the job the run started was stopped, "
                   "and its line says how to resume it"}


def _simulate(args):
    from ldp_marginals.pipelines.simulate import (
        parse_change, parse_dimension, parse_prevalence, simulate_population, write_population,
    )
    from ldp_marginals.schemas.config import load_configs
    configs = load_configs(args.config)
    if len(configs) != 1:
        raise ValueError(f"simulate needs a config with one collection, got {sorted(configs)}")
    cfg = next(iter(configs.values()))
    dims = [parse_dimension(d) for d in args.dimension or []]
    if len({name for name, _ in dims}) != len(dims):
        raise ValueError(f"--dimension names each dimension once, got {[name for name, _ in dims]}")
    prevalences = dict(parse_prevalence(p) for p in args.prevalence or [])
    if (args.change_at is not None or args.change_where) and not args.change:
        raise ValueError("--change-at and --change-where need --change FEATURE=SHARE")
    change = None
    if args.change:
        if args.change_at is None:
            raise ValueError(f"--change {args.change} needs --change-at (ms since epoch)")
        change = parse_change(args.change, args.change_at, args.change_where)
    scenario = {"prevalences": prevalences} if prevalences else {}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if args.devices is not None:
        _simulate_devices(args, cfg, dims, prevalences, change, scenario)
        return
    device_only = [o for o, v in (("--reports-per-day", args.reports_per_day), ("--chatty-over", args.chatty_over),
                                  ("--chatty-regions", args.chatty_regions), ("--chatty-factor", args.chatty_factor))
                   if v is not None]
    if device_only or args.reports is None:
        raise ValueError(f"give --reports N (reports alone) or --devices N (devices, each sending reports at its rate)"
                         + (f"; {', '.join(device_only)} need --devices" if device_only else ""))
    if cfg.device is not None:
        raise ValueError(f"collection {cfg.name!r} bounds what a device sends (privacy.unit {cfg.unit}, "
                         f"max_reports_per_device {cfg.device.max_reports_per_device}): "
                         "its reports name their device, so simulate devices: --devices N (reports alone would "
                         "name none, or a device per report)")
    pop = simulate_population(cfg, args.reports, seed=args.seed, start_ms=args.start_ms,
                              span_seconds=args.span_seconds, reports_per_client=args.reports_per_client,
                              dimensions=dims, diurnal=args.diurnal, prevalences=prevalences, change=change)
    if change:
        scenario["change"] = {"feature": change.feature, "prevalence": change.prevalence, "at_ms": change.at_ms,
                              "where": dict([change.where]) if change.where else {}}
    truth = write_population(cfg, pop, args.out, scenario=scenario)
    print(f"wrote {args.reports:,} reports of {cfg.name!r} to {args.out} and the true counts, means and extremes "
          f"per window and key to {truth}")


def _simulate_devices(args, cfg, dims, prevalences, change, scenario) -> None:
    """``simulate --devices N``: devices with their ids, regions and rates (pipelines/simulate_devices.py)."""
    from ldp_marginals.pipelines.simulate import write_population
    from ldp_marginals.pipelines.simulate_devices import simulate_devices
    for option, given in (("--reports", args.reports is not None), ("--change", change is not None),
                          ("--reports-per-client", args.reports_per_client != 1)):
        if given:
            raise ValueError(f"{option} is for reports alone; with --devices the devices' rates make the reports "
                             "(--reports-per-day) and each device is its own client")
    pop, summary = simulate_devices(cfg, args.devices, seed=args.seed, start_ms=args.start_ms,
                                    span_seconds=args.span_seconds, reports_per_day=args.reports_per_day,
                                    dimensions=dims, prevalences=prevalences, chatty_over=args.chatty_over or 0.0,
                                    chatty_regions=args.chatty_regions or 0.0,
                                    chatty_factor=3.0 if args.chatty_factor is None else args.chatty_factor)
    truth = write_population(cfg, pop, args.out, scenario=scenario, devices=summary)
    print(devices_line(cfg, summary, args.out, truth))


def devices_line(cfg, summary: dict, out: str, truth: str) -> str:
    """What ``simulate --devices`` wrote, and what the job will leave out by each bound, and why."""
    held, drop = summary["not_sent"], summary["dropped_by_the_job"]
    line = (f"wrote {summary['reports']:,} reports of {summary['devices']:,} devices of {cfg.name!r} (mean rate "
            f"{summary['reports_per_day']:g} reports a day, following the day) to {out}, and the true counts, means "
            f"and extremes per window and key to {truth}")
    if held["rate_exceeded"] or held["past_max_reports_per_device"]:
        line += (f"; not sent: {held['rate_exceeded']:,} the clients refused past the declared reports_per_day, "
                 f"{held['past_max_reports_per_device']:,} honest devices held back past max_reports_per_device "
                 "a slice")
    if cfg.device is not None:
        line += (f"; the job will leave out {drop['reports_over_device_bound']:,} reports past max_reports_per_device "
                 f"({summary['chatty_over_bound']:,} chatty devices send over it) and "
                 f"{drop['reports_over_key_bound']:,} past max_keys_per_device ({summary['chatty_two_regions']:,} "
                 "devices report from two regions)")
    return line


VERBOSE = ("-v", "--verbose")
# libraries whose INFO lines a user of the command cannot act on (kafka-python's ~35 connection lines at a
# collector's start, Beam's job-state lines): warnings and errors only, unless -v
QUIET_LOGGERS = ("kafka", "apache_beam", "aiohttp", "urllib3", "google", "numba")


def set_verbosity(verbose: bool) -> None:
    """Quiet by default: Python warnings off (deprecations and version notices of the libraries) and the
    libraries' INFO logs off, the command's own lines (``ldp_marginals.*`` at INFO) kept; ``-v`` brings
    them all back (warnings at Python's default, every logger at INFO)."""
    import logging
    if verbose:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        level = logging.INFO
    else:
        warnings.simplefilter("ignore")
        level = logging.WARNING
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)
    logging.getLogger("ldp_marginals").setLevel(logging.INFO)


def log_level(args) -> int:
    """The root logger's level for a command that logs (the collector): INFO with -v, else WARNING."""
    import logging
    return logging.INFO if getattr(args, "verbose", False) else logging.WARNING


def build_parser() -> tuple:
    """The command's parser and its subcommands' parsers by name."""
    parser = argparse.ArgumentParser(prog="ldp-marginals", description="Windowed private marginals from LDP telemetry")
    parser.add_argument(*VERBOSE, action="store_true",
                        help="show the libraries' warnings and INFO logs (Beam, kafka-python, setuptools' and "
                             "Google's notices); also accepted after the command")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run the job (batch over Avro files, or --streaming); run --help lists "
                                       "its options", add_help=False)
    run_p.add_argument("-h", "--help", action="store_true", help="the options of run (other options go to Beam)")
    sim = sub.add_parser("simulate", help="write a synthetic population of reports and its true counts",
                         description="Write a synthetic population of one collection's reports, randomized by its "
                                     "channels, to an Avro file, and the true counts of every published set to "
                                     "<out>.truth.json: to try a config, or to check the estimates against the "
                                     "truth. Event times are UTC milliseconds.",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sim.add_argument("--config", required=True, help="collection config (JSON or YAML) with one collection")
    sim.add_argument("--reports", type=int, default=None, help="number of reports to write (reports alone: no "
                                                                 "device sends two); or --devices")
    sim.add_argument("--devices", type=int, default=None,
                     help="simulate this many devices instead: each with its id (its slice's token, as the clients "
                          "derive it), its values and region for the run, and its rate following the day; needed "
                          "when the config bounds devices (privacy.unit: device)")
    sim.add_argument("--reports-per-day", type=float, default=None,
                     help="with --devices: the devices' mean rate (default: the config's privacy.reports_per_day)")
    sim.add_argument("--chatty-over", type=float, default=None, metavar="SHARE",
                     help="with --devices: this share of the devices send past the config's bounds (their rate "
                          "times --chatty-factor, uncapped); the job leaves the excess out (reports_over_device_bound)")
    sim.add_argument("--chatty-regions", type=float, default=None, metavar="SHARE",
                     help="with --devices: this share of the devices report from two regions (the first "
                          "--dimension of two values or more), as many from each a slice; with "
                          "max_keys_per_device 1 the job leaves one region's out (reports_over_key_bound)")
    sim.add_argument("--chatty-factor", type=float, default=None,
                     help="with --chatty-over: how many times their rate those devices send (default 3)")
    sim.add_argument("--out", required=True, help="Avro file to write (the true counts go to <out>.truth.json)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the population and of the randomizer")
    sim.add_argument("--start-ms", type=int, default=DEFAULT_START_MS, help="first event time (ms since epoch)")
    sim.add_argument("--span-seconds", type=float, default=None,
                     help="event times span (default: 4 windows; with --devices a day, or a window when longer)")
    sim.add_argument("--reports-per-client", type=int, default=1,
                     help="reports per pseudonymous client (for client extremes)")
    sim.add_argument("--dimension", action="append", default=None, metavar="NAME=VALUE:WEIGHT,...",
                     help="a declared dimension and its values' shares, e.g. region=eu:0.6,us:0.4 (repeatable: "
                          "each report draws a value of each)")
    sim.add_argument("--prevalence", action="append", default=None, metavar="FEATURE=SHARE|FEATURE=VALUE:SHARE,...",
                     help="fix a boolean's share of true reports (dark_mode=0.3) or a categorical's shares "
                          "(os=mac:0.5,win:0.3,linux:0.2); repeatable")
    sim.add_argument("--change", default=None, metavar="FEATURE=SHARE",
                     help="a boolean's new share from --change-at on (in the reports of --change-where only)")
    sim.add_argument("--change-at", type=int, default=None, metavar="MS", help="when the change starts (ms since epoch)")
    sim.add_argument("--change-where", default=None, metavar="DIMENSION=VALUE",
                     help="the dimension value whose reports change (needs --dimension of that dimension)")
    sim.add_argument("--diurnal", action="store_true",
                     help="traffic that follows the day (UTC): about 9x more reports at 14:00 than at 02:00 "
                          "(--devices: always)")
    cc = sub.add_parser("client-config", help="write the JSON a collection's devices read (the JVM, TypeScript and "
                                              "Python clients), from the collection config",
                        description="Write the client config of one collection (docs/client.md): its features, "
                                    "window and, per bit, the p and q the device randomizes with (the permanent "
                                    "channel of a bit that memoizes), whether reports carry the device token and "
                                    "the declared reports_per_day; or the kind's object (hadamard, subset). Serve "
                                    "it to the devices as is: its numbers are final, and the channel they make is "
                                    "the one the job inverts.")
    from ldp_marginals.pipelines.client_config import add_client_config_arguments
    add_client_config_arguments(cc)
    prod = sub.add_parser("produce", help="send Avro report files to a Kafka topic as a collector does",
                          description="Send the reports of Avro files (as simulate writes) to a Kafka topic as a "
                                      "collector does: in Avro containers of at most --batch-reports reports and "
                                      "--max-message-bytes bytes, each a Kafka record whose timestamp is the "
                                      "earliest event time it holds. Needs kafka-python (pip install "
                                      "'ldp-marginals[kafka]').",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from ldp_marginals.pipelines.produce import add_produce_arguments
    add_produce_arguments(prod)
    col = sub.add_parser("collect", help="serve HTTP for devices' reports and send them to Kafka (docs/collector.md)",
                         description="Serve POST /v1/reports for the devices' reports (one report's Avro bytes, or "
                                     "an Avro container of many): authenticate the app by its key, screen the "
                                     "reports with the job's checks, bound the requests per device token, and "
                                     "answer 200 once Kafka acknowledged them. Needs aiohttp and kafka-python "
                                     "(pip install 'ldp-marginals[collect]').")
    from ldp_marginals.pipelines.collect import add_collect_arguments
    add_collect_arguments(col)
    cal = sub.add_parser("calibrate", help="noise calibration: local DP vs sufficient DP",
                         description="The privacy calculator for symmetric bit flips: the flip probability local "
                                     "DP needs for L bits at epsilon, and the one sufficient DP (Zhilyaev & Zeber) "
                                     "needs for a population of N reports (or, with --flip, the population a flip "
                                     "needs). Defaults are shown beside each option.",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    calibrate_cmd.add_calibrate_arguments(cal)
    plan_p = sub.add_parser("plan", help="before collecting: each marginal's precision at N reports per window, "
                                         "or the reports a target precision needs",
                            description="Before collecting: the precision (interval half-width) each published "
                                        "marginal, table cell and numeric mean of a config will have at N reports "
                                        "per window, or the reports per window a target half-width needs. "
                                        "Marginals and cells on the frequency scale, means on the feature's own "
                                        "scale; intervals at the collection's level.",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from ldp_marginals.pipelines.plan import add_plan_arguments
    add_plan_arguments(plan_p)
    cmp_p = sub.add_parser("compare", help="what moved: each marginal's change between two windows or two "
                                           "dimension values, with z scores and Benjamini-Hochberg",
                           description="What moved in a run's outputs: per published marginal (or conditional, or "
                                       "mean) the change of its estimate between two windows, or between two "
                                       "values of a dimension in one window, with its standard error, z, interval "
                                       "and Benjamini-Hochberg over the sets compared. Times are window starts in "
                                       "UTC (2026-01-01T00:00).",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from ldp_marginals.pipelines.compare import add_compare_arguments
    add_compare_arguments(cmp_p)
    read_p = sub.add_parser("read", help="a run's rows of one kind as CSV, JSON lines or Parquet (final rows by "
                                         "default)",
                            description="Print a run's rows of one kind (marginals, tables, extremes, ...), or write "
                                        "them to --output, selected by collection, window starts and dimension "
                                        "values as ldp_marginals.read selects them. Only the windows that closed "
                                        "(their final pane) unless --no-final-only; every row says its pane "
                                        "(pane_index, pane_timing, final), whether it is a rollup row, and "
                                        "window_state. Times are UTC.",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from ldp_marginals.pipelines.read_command import add_read_arguments
    add_read_arguments(read_p)
    demo = sub.add_parser("demo", help="simulate, run on the DirectRunner, print estimates beside the truth",
                          description="Simulate two regions' reports over five hourly windows, run the job on the "
                                      "DirectRunner, print estimates beside the truth, and write the dashboard.")
    demo.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    demo.add_argument("--reports", type=int, default=60_000,
                      help=f"reports to simulate, at least {MIN_DEMO_REPORTS:,} (default 60,000)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the simulation (default 7)")

    dash = sub.add_parser("dashboard", help="the outputs as one offline HTML page, written or served on localhost",
                          description="A run's outputs as one HTML page (Plotly inlined, no network): served on "
                                      "localhost, where each selection is a query of the server, or written to a "
                                      "file to share (the latest complete window of each key, with charts over "
                                      "--span windows). Times are UTC.",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from ldp_marginals.pipelines.dashboard import add_dashboard_arguments
    add_dashboard_arguments(dash)
    return parser, dict(sub.choices)


def main(argv=None) -> int:
    # -v anywhere (before or after the command): run passes what it does not know to Beam, so it is taken
    # out here
    program = argv is None   # the program itself, not a caller in Python
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = any(a in VERBOSE for a in argv)
    argv = [a for a in argv if a not in VERBOSE]
    # Google's client libraries warn on import about versions (grpcio, Python's end of life): nothing a
    # user of this command can act on, and ten lines before every streaming run's first word
    set_verbosity(verbose)
    parser, _ = build_parser()
    args, rest = parser.parse_known_args(argv)
    args.verbose = verbose
    try:
        if args.command == "run":
            from ldp_marginals.pipelines.run import nothing_counted, run
            problem = nothing_counted(run(rest if not args.help else ["--help"]))
            if problem:
                print(f"ldp-marginals run: error: {problem}", file=sys.stderr)
                return EXIT_NOTHING_COUNTED
        elif rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        elif args.command == "simulate":
            _simulate(args)
        elif args.command == "client-config":
            from ldp_marginals.pipelines.client_config import main as client_config_main
            client_config_main(args)
        elif args.command == "produce":
            from ldp_marginals.pipelines.produce import main as produce_main
            produce_main(args)
        elif args.command == "collect":
            from ldp_marginals.pipelines.collect import main as collect_main
            collect_main(args)
        elif args.command == "calibrate":
            calibrate_cmd.main(args)
        elif args.command == "plan":
            from ldp_marginals.pipelines.plan import main as plan_main
            plan_main(args)
        elif args.command == "compare":
            from ldp_marginals.pipelines.compare import main as compare_main
            compare_main(args)
        elif args.command == "read":
            from ldp_marginals.pipelines.read_command import main as read_main
            read_main(args)
        elif args.command == "demo":
            if args.reports < MIN_DEMO_REPORTS:
                raise ValueError(f"--reports must be >= {MIN_DEMO_REPORTS:,}, so that every hourly window of each "
                                 f"region holds the demo's min_reports=2000, got --reports={args.reports}")
            from ldp_marginals.pipelines.demo import main as demo_main
            demo_main(args.out, args.reports, args.seed)
        elif args.command == "dashboard":
            from ldp_marginals.pipelines.dashboard import main as dashboard_main
            dashboard_main(args)
    except KeyboardInterrupt:   # Ctrl-C outside a running job (run stops its job itself: stopping.py)
        print(f"ldp-marginals {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`| head`): no traceback (as the Python docs advise)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except ValueError as err:
        print(f"ldp-marginals {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as err:
        from ldp_marginals.pipelines.run import JobFailed  # only run raises it; Beam is loaded by then
        if not isinstance(err, JobFailed):
            raise
        print(f"ldp-marginals {args.command}: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as err:
        stopping = sys.modules.get("ldp_marginals.pipelines.stopping")   # loaded by run only
        if stopping is None or not isinstance(err, stopping.JobStopped):
            raise
        print(f"ldp-marginals {args.command}: {err}", file=sys.stderr)   # stopped on a signal: what, how to resume
        if program:
            # the program itself (not a caller in Python): end now. The runner's gRPC threads (the
            # LOOPBACK worker's, the job service's streams) may outlive the job they served, and an
            # interpreter finalizing under them aborted (SIGABRT) after the line was printed
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(err.exit_code)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
