"""``ldp-marginals client-config``: the JSON a collection's devices read (docs/client.md), written from the
collection config the job runs with (:mod:`ldp_marginals.schemas.client_config`), so that no one computes a
channel's p and q by hand and the clients' numbers are the ones the job inverts."""
from __future__ import annotations

import argparse
import json
import sys


def add_client_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="collection config (JSON or YAML), as the job reads it")
    parser.add_argument("--collection", default=None, metavar="NAME",
                        help="the collection (needed when the config holds several)")
    parser.add_argument("--output", default=None, metavar="FILE",
                        help="write the JSON to FILE (default: print it)")


def client_config_text(config_path: str, collection: str | None = None) -> str:
    """The client config of ``collection`` of the file ``config_path`` (its only one when None), as JSON text."""
    from ldp_marginals.schemas.client_config import client_config
    from ldp_marginals.schemas.config import load_configs
    configs = load_configs(config_path)
    if collection is None:
        if len(configs) != 1:
            raise ValueError(f"--config {config_path} holds collections {sorted(configs)}: name one with --collection")
        collection = next(iter(configs))
    if collection not in configs:
        raise ValueError(f"--collection {collection!r} is not in --config {config_path} (it holds {sorted(configs)})")
    return json.dumps(client_config(configs[collection]), indent=2) + "\n"


def main(args) -> None:
    text = client_config_text(args.config, args.collection)
    if args.output is None:
        sys.stdout.write(text)
        return
    try:
        with open(args.output, "w") as fh:
            fh.write(text)
    except OSError as err:
        raise ValueError(f"--output {args.output}: cannot write it ({err.strerror or err})") from None
    print(f"wrote the client config of the collection to {args.output}: serve it to the devices as is", file=sys.stderr)
