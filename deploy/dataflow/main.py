"""Dataflow flex template entry point: the launcher runs this file with the template's parameters
(``--config=... --subscription=... --output=...``) and Dataflow's own options (runner, project,
region, temp location, ``--sdk_container_image``). It builds the streaming job and returns once
the job is submitted; the job's code is the same ``ldp-marginals run`` every runner uses."""
import sys

from ldp_marginals.pipelines.run import run

# the template is the streaming job; the workers run this same image, so nothing is staged
TEMPLATE_ARGS = ["--streaming", "--detach", "--sdk_location=container"]


def main(argv=None) -> None:
    run(TEMPLATE_ARGS + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
