"""`accelbench slurm`: the job script for a sweep, checked against its allocation before it is
written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from accelbench.cli.app import DbOption, app, check_out, console, write_file
from accelbench.cli.options import job_help
from accelbench.cli.run import cells_of
from accelbench.errors import AccelbenchError
from accelbench.orchestration import forks, launch
from accelbench.orchestration.sweep import check_cells, check_timeout
from accelbench.secrets import has_secret, redact_url, scrub, write_private


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def slurm(
    ctx: typer.Context,
    nodes: Annotated[int, typer.Option(help=job_help("nodes"), min=1)],
    gpus_per_node: Annotated[int, typer.Option(help=job_help("gpus_per_node"), min=0)] = 0,
    cpus_per_node: Annotated[
        int | None, typer.Option(help=job_help("cpus_per_node"), min=1)
    ] = None,
    time: Annotated[str, typer.Option(help=job_help("time"))] = "01:00:00",
    partition: Annotated[str | None, typer.Option(help=job_help("partition"))] = None,
    account: Annotated[str | None, typer.Option(help=job_help("account"))] = None,
    out: Annotated[Path, typer.Option(help="Where to write the job script.")] = Path(
        "accelbench.sbatch"
    ),
    submit: Annotated[bool, typer.Option("--submit", help="Submit it with sbatch.")] = False,
    db: DbOption = None,
) -> None:
    """Write a Slurm job script for the sweep after `--`, e.g.
    `accelbench slurm --nodes 2 --gpus-per-node 4 -- run resnet50 --replicas 4,8 --nodes 2`."""
    from accelbench.orchestration import slurm as slurm_job
    from accelbench.storage.connect import default_path, is_url, redacted

    check_out(out)  # before the cells' pre-flight, which takes seconds
    run_args = list(ctx.args)
    if not run_args or run_args[0] != "run":
        raise AccelbenchError(
            "give the sweep after --, e.g. accelbench slurm --nodes 2 -- run resnet50 "
            "--replicas 8 --nodes 2"
        )
    db = _db_of_sweep(run_args, db)
    if leaked := [arg for arg in run_args if scrub(arg) != arg]:
        raise AccelbenchError(
            f"the sweep's {scrub(leaked[0])} carries a password, which the job script would show "
            "to every node's ps: give the URL without it (a server's key: --api-key-env NAME)"
        )
    try:  # the sweep's options, checked now rather than when the job starts
        parsed = typer.main.get_command(app).commands["run"].make_context("run", run_args[1:])  # type: ignore[attr-defined]
    except typer.TyperException as exc:  # typer's own click: a usage error
        raise AccelbenchError(f"the sweep after --: {exc.format_message()}") from None
    job = slurm_job.JobSpec(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        cpus_per_node=cpus_per_node,
        time=time,
        partition=partition,
        account=account,
    )
    check_timeout(parsed.params["timeout_s"])
    with forks.serving():  # the probes forked by a cell server, kept for the next command
        specs = cells_of(parsed)  # every cell valid now, not when the job starts after its queue
        slurm_job.check_allocation(job, specs)
        launch.preflight_in_child(check_cells(specs), parsed.params["timeout_s"])
    where = slurm_job.database_path(db or default_path())
    if slurm_job.node_local(where):
        console.print(
            f"warning: {where} is on the batch node's own disk, which other nodes and the login "
            "node do not see: give --db a path on the shared file system",
            style="yellow",
            soft_wrap=True,
        )
    secret = None
    if is_url(where) and has_secret(where):  # a password: never in the script
        secret = out.with_name(out.name + ".db-url")
        write_private(secret, where)
    write_file(out, slurm_job.script(job, run_args, where, secret), mode=0o755)
    console.print(
        f"wrote {out}; results go to {redacted(where)}"
        + (f" (its URL is in {secret}, readable by you only)" if secret else "")
    )
    if submit:
        console.print(slurm_job.submit(out))


def _db_of_sweep(run_args: list[str], db: str | None) -> str | None:
    """The database, given to `slurm` or to the sweep after `--` (taken out of `run_args`)."""
    found = None
    for i, arg in enumerate(run_args):
        if arg == "--db" and i + 1 < len(run_args):
            found, run_args[i : i + 2] = run_args[i + 1], []
            break
        if arg.startswith("--db="):
            found, run_args[i : i + 1] = arg.removeprefix("--db="), []
            break
    if found is not None and db is not None and found != db:
        raise AccelbenchError(
            f"--db {redact_url(db)} and, after --, --db {redact_url(found)}: give the database once"
        )
    return db if found is None else found
