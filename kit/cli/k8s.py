"""`kit k8s`: a recipe as Kubernetes jobs (kit.run.k8s); registered in kit.cli."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kit.cli.options import BatchDevice, BatchRepeats, BatchSmoke
from kit.io.errors import InputError
from kit.shared.limits import MAX_GPUS, MAX_NODES


def k8s(
    recipe: Annotated[Path, typer.Argument(help="A recipe YAML file.")],
    image: Annotated[
        str | None,
        typer.Option(
            help="The kit's image by digest, REPO@sha256:... (default: the digest this machine's "
            "Docker recorded when the recipe's `kit build` image was pushed)."
        ),
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_NODES,
            help="Nodes, one pod each (default: the recipe's nodes.hosts count, or 1).",
        ),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_GPUS,
            help="Processes and nvidia.com/gpu per pod (default: the recipe's).",
        ),
    ] = None,
    namespace: Annotated[str, typer.Option(help="The namespace every object goes in.")] = "default",
    node_selector: Annotated[
        list[str] | None, typer.Option(help="A pod nodeSelector KEY=VALUE (repeatable).")
    ] = None,
    toleration: Annotated[
        list[str] | None,
        typer.Option(help="A pod toleration KEY[=VALUE][:EFFECT] (no VALUE: Exists; repeatable)."),
    ] = None,
    service_account: Annotated[str | None, typer.Option(help="The pods' service account.")] = None,
    host_network: Annotated[
        bool, typer.Option("--host-network", help="Pods on the node's network (RDMA NICs).")
    ] = False,
    jobset: Annotated[
        bool, typer.Option("--jobset", help="A JobSet per run instead of an Indexed Job (its CRD).")
    ] = False,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(help="Kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster)."),
    ] = None,
    context: Annotated[str | None, typer.Option(help="Kubeconfig context.")] = None,
    pending_timeout: Annotated[
        float,
        typer.Option(  # bounds: kit.run.k8s.manifests (one message for NaN and range)
            help="Seconds for every pod of a run to start (pull, schedule): 1 s to 7 days."
        ),
    ] = 1800.0,
    device: BatchDevice = "cuda",
    smoke: BatchSmoke = None,
    repeats: BatchRepeats = None,
    out: Annotated[
        Path | None, typer.Option(help="Bundle directory (default reports/NAME-TIME).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the manifests; create nothing.")
    ] = False,
) -> None:
    """Run a recipe on a Kubernetes cluster: a headless Service and an Indexed Job per run.

    Each pod runs the worker under torchrun (--nnodes N, --node-rank from its completion index,
    c10d rendezvous on pod 0 through the Service); the kit watches the pods, reads their logs,
    results and inventories through the API, deletes what it created and seals the bundle.

    Example: kit k8s recipes/allreduce.yaml --nodes 2 --gpus-per-node 8 --image registry.example/kit@sha256:... --dry-run
    """
    from kit.run import registry
    from kit.run.k8s.manifests import K8sOptions
    from kit.run.k8s.runtime import load
    from kit.run.slurm.runtime import command_line
    from kit.runtime.base import check_no_control

    opts = K8sOptions(
        image=image,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        namespace=namespace,
        node_selector=list(node_selector or []),
        tolerations=list(toleration or []),
        service_account=service_account,
        host_network=host_network,
        jobset=jobset,
        pending_timeout_s=pending_timeout,
        device=device,
        smoke=smoke,
        repeats=repeats,
        out=out,
        command=command_line(),
    )
    if kubeconfig is not None and not kubeconfig.is_file():  # named: checked, dry run or not
        raise InputError(f"--kubeconfig {str(kubeconfig)!r}: no such file")
    if context is not None:  # free-form, handed to the Kubernetes client (never to a shell)
        check_no_control("--context", context)
        if not context.strip():
            raise InputError(
                f"--context {context!r}: empty; name a kubeconfig context or leave it out"
            )
        if context.startswith("-"):
            raise InputError(f"--context {context!r}: an option, not a kubeconfig context name")
    runtime = registry.batch("k8s")(opts, kubeconfig, context)
    printed = runtime.submit(load(recipe), dry_run=dry_run)
    print(printed, end="" if dry_run else "\n", file=sys.stdout)
    raise typer.Exit(runtime.code)
