"""The workloads component alone (a hand-built context): the registry is restored
before active_pods is published, a corrupt record stops start unless the loss is
accepted, kubelet mode and config disable it; static manifests survive a restart."""

from __future__ import annotations

import pytest

from agent.contracts import DaemonContext
from agent.config import loads
from agent.contracts import ACTIVE_PODS, WORKLOADS
from agent.workloads.component import STATE_DIR, factory, manifest_dir_for
from agent.workloads.manifestdir import ManifestDir
from tests.integration.devicemanager.harness import run
from tests.integration.workloads.harness import pipeline, pod_yaml, two_numa


def _ctx(root, text: str = "", mode: str = "standalone") -> DaemonContext:
    return DaemonContext(loads(text), root, two_numa(), mode=mode)


def test_factory_respects_mode_and_config(tmp_path):
    assert factory(_ctx(tmp_path, mode="kubelet")) is None
    assert factory(_ctx(tmp_path, "[workloads]\nenabled = false\n")) is None
    assert factory(_ctx(tmp_path)) is not None


def test_restore_before_publish_and_corrupt_records(sockdir):
    async def main():
        root = sockdir / "root"
        # a pod admitted by an earlier run (the registry files are the truth)
        async with pipeline(sockdir) as env:
            pod = (await env.workloads.admit_manifest(pod_yaml("web", devices=0, cpus=1))).pod
            (root / "workloads").mkdir(parents=True)
            (env.base / "pods").rename(root.joinpath(*STATE_DIR))

        # no socket group, whatever groups this machine has (a `hwagent` group would make it 0660)
        ctx = _ctx(root, '[workloads]\nsocket_group = ""\nsocket_path = "%s"\n' % (sockdir / "a.sock"))
        published: list[frozenset[str]] = []

        publish = ctx.publish

        def watching(key, handle):
            if key == ACTIVE_PODS:
                published.append(handle.active_pod_uids())  # what the clean-ups see from the first moment
            publish(key, handle)

        ctx.publish = watching  # type: ignore[method-assign]
        comp = factory(ctx)
        await comp.start(ctx)
        try:
            assert published == [frozenset({pod.uid})]
            assert ctx.lookup(WORKLOADS) is comp.workloads and comp.healthy()
            assert (sockdir / "a.sock").stat().st_mode & 0o777 == 0o600
        finally:
            await comp.stop()
        assert ctx.lookup(ACTIVE_PODS) is None

        (root.joinpath(*STATE_DIR) / f"{pod.uid}.json").write_text("{torn")
        comp = factory(ctx)
        with pytest.raises(RuntimeError, match="accept_state_loss"):
            await comp.start(ctx)
        await comp.stop()
        ctx2 = _ctx(root, '[workloads]\naccept_state_loss = true\nsocket_path = "%s"\n' % (sockdir / "b.sock"))
        comp = factory(ctx2)
        await comp.start(ctx2)
        try:
            assert comp.workloads.active_pod_uids() == frozenset()
            assert list(root.joinpath(*STATE_DIR).glob(f"{pod.uid}.json.corrupt-*"))
        finally:
            await comp.stop()

    run(main())


def test_the_manifest_directory_exists_before_the_socket_answers(sockdir, monkeypatch):
    """A script that waits for the admission socket may drop a manifest in at once."""
    import agent.unixsock

    ctx = _ctx(sockdir / "root", '[workloads]\nsocket_path = "%s"\n' % (sockdir / "a.sock"))
    comp = factory(ctx)
    mdir = manifest_dir_for(comp.cfg, ctx.root_dir)
    seen: list[bool] = []
    real = agent.unixsock.serve_unix

    async def serving(server, path):
        seen.append(mdir.is_dir())
        return await real(server, path)

    monkeypatch.setattr(agent.unixsock, "serve_unix", serving)

    async def main():
        await comp.start(ctx)
        await comp.stop()

    run(main())
    assert seen == [True]


def test_unchanged_static_manifest_is_not_readmitted_after_a_restart(sockdir):
    async def main():
        mdir = sockdir / "manifests"
        mdir.mkdir()
        (mdir / "a.yaml").write_text(pod_yaml("a", cpus=1, devices=1))  # a device: its UID is within the host's bound
        (mdir / "b.yml").write_text("metadata: {name: b}\nspec: {containers: [{name: c, command: [x], volumeMounts: []}]}\n")
        async with pipeline(sockdir) as env:
            first = ManifestDir(mdir, env.workloads)
            await first.sync_once()
            (rec,) = env.registry.records()
            assert rec.pod.spec.name == "a" and rec.pod.spec.source_digest and len(rec.uid) == 36
            assert rec.pod.assignments["main"].devices
            ((path, err),) = first.errors()
            assert path.endswith("b.yml") and "spec.containers[0].volumeMounts" in err
            events: list[str] = []
            env.registry.listeners.append(lambda ev: events.append(ev.type))
            again = ManifestDir(mdir, env.workloads)  # as after a restart: no memory of the files
            await again.sync_once()
            assert events == [] and [r.uid for r in env.registry.records()] == [rec.uid]
            # removed while "down": the next pass removes its pod
            (mdir / "a.yaml").unlink()
            third = ManifestDir(mdir, env.workloads)
            await third.sync_once()
            assert env.registry.records() == [] and env.policy.state.get(rec.uid, "main") is None
            lenient = ManifestDir(mdir, env.workloads, ignore_unknown=True)
            await lenient.sync_once()
            assert [r.pod.spec.name for r in env.registry.records()] == ["b"] and lenient.errors() == []

    run(main())


def test_a_refused_static_manifest_is_retried_with_back_off(sockdir):
    async def main():
        mdir = sockdir / "manifests"
        mdir.mkdir()
        (mdir / "gpu.yaml").write_text(pod_yaml("gpu", cpus=1, resource="example.com/late"))
        now = [1000.0]
        async with pipeline(sockdir) as env:
            calls: list[str] = []
            real = env.workloads.admit

            async def counting(spec):
                calls.append(spec.name)
                return await real(spec)

            env.workloads.admit = counting  # type: ignore[method-assign]
            md = ManifestDir(mdir, env.workloads, clock=lambda: now[0])
            await md.sync_once()
            ((_, err),) = md.errors()
            assert "RESOURCE_EXHAUSTED" in err and "example.com/late" in err
            await md.sync_once()
            assert calls == ["gpu"]  # not before the back-off
            now[0] += 10.5
            await md.sync_once()
            assert calls == ["gpu", "gpu"]
            now[0] += 10.5  # the back-off doubled to 20 s
            await md.sync_once()
            assert calls == ["gpu", "gpu"]
            now[0] += 10
            await md.sync_once()
            assert calls == ["gpu", "gpu", "gpu"] and len(env.registry) == 0

    run(main())
