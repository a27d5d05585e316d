"""`kit k8s`: a recipe as Kubernetes jobs (kit.run.k8s); registered in kit.cli."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kit.cli import batch
from kit.cli.options import BundleOut
from kit.io.errors import InputError

# the batch options as `kit k8s` words them
Nodes = batch.nodes("Nodes, one pod each (default: the recipe's nodes.hosts count, or 1).")
GpusPerNode = batch.gpus_per_node("Processes and nvidia.com/gpu per pod (default: the recipe's).")
DryRun = batch.dry_run("Print the manifests; create nothing.")


def k8s(
    recipe: Annotated[Path, typer.Argument(help="A recipe YAML file.")],
    image: Annotated[
        str | None,
        typer.Option(
            help="The kit's image by digest, REPO@sha256:... (default: the digest this machine's "
            "Docker recorded when the recipe's `kit build` image was pushed)."
        ),
    ] = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
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
    device: batch.Device = "cuda",
    smoke: batch.Smoke = None,
    repeats: batch.Repeats = None,
    out: BundleOut = None,
    dry_run: DryRun = False,
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
        **batch.fields(device, smoke, repeats, out),
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
    batch.submit(runtime, load(recipe), dry_run, wait=True)  # kit k8s always waits
