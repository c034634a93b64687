//! Create → read back → drift is empty, for every guest of the demo
//! repository; and drift → update → drift converges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::{Target, Work};
use proxops_core::drift::{CloudInitSecrets, Context, create_params, guest_drift};
use proxops_core::live::{GuestType, LiveSnapshot};

use support::{demo, sim};

#[test]
fn every_demo_guest_reads_back_without_drift_after_create_or_clone() {
    let secrets = CloudInitSecrets::default();
    let mut checked = 0;
    for c in demo::clusters() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let snap = demo::created(&c, &ctx);
        for o in demo::in_order(&c) {
            let Some((node, vmid)) = o.spec.guest_id() else {
                continue;
            };
            let live = snap.guest(node, vmid).unwrap();
            let d = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            assert!(
                d.changes.is_empty(),
                "{}: {:#?}\nlive: {:#?}",
                o.r#ref,
                d.changes,
                live.config
            );
            assert!(d.anomalies.is_empty(), "{}: {:#?}", o.r#ref, d.anomalies);
            assert!(d.params.is_empty() && d.delete.is_empty());
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} guests checked");
}

#[test]
fn drift_update_converges_in_one_write() {
    let secrets = CloudInitSecrets::default();
    for c in demo::clusters() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let mut snap = demo::created(&c, &ctx);
        for o in demo::in_order(&c) {
            let Some((node, vmid)) = o.spec.guest_id() else {
                continue;
            };
            // Someone edits the guest by hand: other memory, other cores, a
            // stray tag, the NIC moved to another bridge.
            {
                let g = snap.guests.get_mut(&(node.clone(), vmid)).unwrap();
                let cfg = g.config.as_mut().unwrap();
                cfg.values.insert("memory".into(), "12345".into()).unwrap();
                cfg.values.insert("cores".into(), "7".into()).unwrap();
                cfg.values
                    .insert("tags".into(), "handmade;proxops".into())
                    .unwrap();
                let net0 = cfg.values.get("net0").unwrap().to_owned();
                cfg.values
                    .insert("net0".into(), net0.replace("bridge=vmbr0", "bridge=vmbr9"))
                    .unwrap();
            }
            let live = snap.guest(node, vmid).unwrap().clone();
            let d = guest_drift(o, &ctx, &live, live.config.as_ref().unwrap()).unwrap();
            let keys: Vec<&str> = d.changes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(keys, ["cores", "memory", "net0", "tags"], "{}", o.r#ref);
            // The rewritten NIC keeps the MAC PVE assigned.
            let old_net = live
                .config
                .as_ref()
                .unwrap()
                .get("net0")
                .unwrap()
                .to_ascii_lowercase();
            let new_net = d.params.get("net0").unwrap().expose().to_ascii_lowercase();
            let mac = |s: &str| {
                s.split(',').find_map(|t| {
                    t.split_once('=')
                        .filter(|(k, _)| *k != "bridge" && *k != "name")
                        .map(|(_, v)| v.to_owned())
                        .filter(|v| v.contains(':'))
                })
            };
            assert_eq!(mac(&old_net), mac(&new_net), "{}", o.r#ref);
            let work = Work::UpdateConfig {
                guest_type: live.guest_type,
                params: d.params.clone(),
                delete: d.delete.clone(),
                digest: live.config.as_ref().unwrap().digest.clone(),
                stop_first: false,
                restart_after: false,
                ha: None,
            };
            sim::apply(&mut snap, node, &Target::Guest(vmid), &work);
            let live = snap.guest(node, vmid).unwrap();
            let again = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            assert!(
                again.changes.is_empty(),
                "{}: {:#?}",
                o.r#ref,
                again.changes
            );
        }
    }
}

mod generated {
    //! Generated manifests: create → read back → no drift, for shapes the
    //! demo does not cover.
    use super::*;
    use proptest::prelude::*;
    use support::fixture::{cluster, object};

    fn opt<T: std::fmt::Debug + Clone>(
        s: impl Strategy<Value = T>,
    ) -> impl Strategy<Value = Option<T>> {
        prop::option::of(s)
    }

    fn disk() -> impl Strategy<Value = String> {
        (
            prop_oneof![Just("local-lvm"), Just("ceph")],
            prop_oneof![
                Just("512MiB".to_owned()),
                (1u32..200).prop_map(|g| format!("{g}GiB"))
            ],
            opt(any::<bool>()),
            opt(prop_oneof![Just("on"), Just("ignore")]),
            opt(any::<bool>()),
            opt(prop_oneof![
                Just("native"),
                Just("threads"),
                Just("io_uring")
            ]),
        )
            .prop_map(|(st, size, io, disc, ssd, aio)| {
                let mut s = format!("    - storage: {st}\n      size: {size}\n");
                if let Some(b) = io {
                    s.push_str(&format!("      iothread: {b}\n"));
                }
                if let Some(d) = disc {
                    s.push_str(&format!("      discard: \"{d}\"\n"));
                }
                if let Some(b) = ssd {
                    s.push_str(&format!("      ssd: {b}\n"));
                }
                if let Some(a) = aio {
                    s.push_str(&format!("      aio: {a}\n"));
                }
                s
            })
    }

    fn nic() -> impl Strategy<Value = String> {
        (
            prop_oneof![Just("vmbr0"), Just("vmbr1")],
            opt(1u32..4094),
            opt(0u8..=255),
            opt(any::<bool>()),
            opt(prop_oneof![Just(0.0f64), Just(12.5), Just(100.0)]),
            opt(prop_oneof![Just("e1000"), Just("virtio")]),
        )
            .prop_map(|(br, vlan, mac, fw, rate, model)| {
                let mut s = format!("    - bridge: {br}\n");
                if let Some(v) = vlan {
                    s.push_str(&format!("      vlan: {v}\n"));
                }
                if let Some(m) = mac {
                    s.push_str(&format!("      mac: BC:24:11:00:AB:{m:02X}\n"));
                }
                if let Some(f) = fw {
                    s.push_str(&format!("      firewall: {f}\n"));
                }
                if let Some(r) = rate {
                    s.push_str(&format!("      rate-limit: {r}\n"));
                }
                if let Some(m) = model {
                    s.push_str(&format!("      model: {m}\n"));
                }
                s
            })
    }

    prop_compose! {
        fn vm_doc()(
            template in any::<bool>(),
            stopped in any::<bool>(),
            mem in 1u64..64,
            cores in 1u32..16,
            cpu in prop_oneof![Just("host"), Just("x86-64-v2-AES"), Just("kvm64")],
            disks in prop::collection::vec(disk(), 1..4),
            nics in prop::collection::vec(nic(), 1..3),
            sockets in opt(1u32..3),
            numa in opt(any::<bool>()),
            machine in opt(prop_oneof![Just("i440fx"), Just("q35")]),
            ovmf in opt(opt(any::<bool>())),
            cloud_init in any::<bool>(),
            cdrom in opt(prop_oneof![Just("none"), Just("debian-iso")]),
            flags in prop::collection::vec(any::<bool>(), 5),
            ci_user in opt(Just("ops")),
            dns in any::<bool>(),
            tags in prop::collection::btree_set(prop_oneof![Just("web"), Just("db"), Just("x-1")], 0..3),
        ) -> String {
            let kind = if template { "TemplateVM" } else { "VM" };
            let mut s = format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: gen\nspec:\n  node: pve1\n  vmid: 100\n  memory: {}MiB\n  cpu:\n    type: {cpu}\n    cores: {cores}\n", mem * 256);
            if stopped || template {
                s.push_str("  state: stopped\n");
            }
            s.push_str("  disks:\n");
            s.push_str(&disks.concat());
            s.push_str("  networks:\n");
            s.push_str(&nics.concat());
            let mut hw = String::new();
            if let Some(v) = sockets { hw.push_str(&format!("    sockets: {v}\n")); }
            if let Some(v) = numa { hw.push_str(&format!("    numa: {v}\n")); }
            if let Some(v) = machine { hw.push_str(&format!("    machine: {v}\n")); }
            if let Some(sb) = ovmf {
                hw.push_str("    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      template: 4m\n");
                if let Some(b) = sb { hw.push_str(&format!("      secure-boot: {}\n", if b { "enabled" } else { "disabled" })); }
                hw.push_str("    tpm:\n      storage: local-lvm\n");
            }
            if cloud_init { hw.push_str("    cloud-init:\n      enabled: true\n      storage: local-lvm\n"); }
            if let Some(c) = cdrom { hw.push_str(&format!("    cdrom:\n      iso: {c}\n")); }
            if !hw.is_empty() { s.push_str("  hardware:\n"); s.push_str(&hw); }
            let names = ["onboot", "protection", "agent", "acpi", "tablet"];
            let opts: String = names.iter().zip(&flags).map(|(n, b)| format!("    {n}: {b}\n")).collect();
            s.push_str("  options:\n");
            s.push_str(&opts);
            s.push_str("    boot-order: [scsi0, net0]\n");
            if ci_user.is_some() || dns {
                s.push_str("  cloud-init-data:\n");
                if let Some(u) = ci_user { s.push_str(&format!("    ci-user: {u}\n")); }
                if dns { s.push_str("    nameservers: [1.1.1.1, 9.9.9.9]\n    ipconfigs:\n      - nic: 0\n        ip: 10.0.0.5/24\n        gateway: 10.0.0.1\n"); }
            }
            if !tags.is_empty() {
                s.push_str(&format!("  tags: [{}]\n", tags.into_iter().collect::<Vec<_>>().join(", ")));
            }
            s
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

        #[test]
        fn generated_vm_reads_back_without_drift(doc in vm_doc()) {
            let c = cluster(&[&doc]);
            let o = object(&c, "gen");
            let secrets = CloudInitSecrets::default();
            let ctx = Context { cluster: &c, secrets: &secrets };
            let (node, vmid) = o.spec.guest_id().unwrap();
            let mut snap = LiveSnapshot::default();
            let work = Work::CreateGuest { guest_type: GuestType::Qemu, params: create_params(o, &ctx).unwrap(), mark_template: o.r#ref.kind.is_template() };
            sim::apply(&mut snap, node, &Target::Guest(vmid), &work);
            let live = snap.guest(node, vmid).unwrap();
            let d = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            prop_assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{doc}\n{:#?}\n{:#?}\n{:#?}", d.changes, d.anomalies, live.config);
        }
    }

    prop_compose! {
        fn ct_doc()(
            template in any::<bool>(),
            mem in 1u64..16,
            swap in opt(0u64..8),
            cores in 1u32..8,
            root_gib in 1u32..64,
            mps in prop::collection::vec((1u32..32, opt(any::<bool>()), opt(any::<bool>()), opt(Just("noatime"))), 0..3),
            binds in prop::collection::vec(opt(any::<bool>()), 0..2),
            nics in prop::collection::vec((opt(Just("eth")), opt(1u32..4094), opt(0u8..=255), opt(any::<bool>()), opt(prop_oneof![Just("dhcp"), Just("10.0.0.5/24")])), 1..3),
            dns in any::<bool>(),
            flags in prop::collection::vec(opt(any::<bool>()), 5),
            arch in opt(prop_oneof![Just("amd64"), Just("arm64")]),
        ) -> String {
            let kind = if template { "TemplateCT" } else { "LXC" };
            let mut s = format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: gen\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: {}MiB\n  cpu:\n    cores: {cores}\n  root:\n    storage: local-lvm\n    size: {root_gib}GiB\n", mem * 128);
            if let Some(sw) = swap { s.push_str(&format!("  swap: {}MiB\n", sw * 128)); }
            if let Some(a) = arch { s.push_str(&format!("  arch: {a}\n")); }
            if !mps.is_empty() {
                s.push_str("  mount-points:\n");
                for (i, (g, ro, backup, mo)) in mps.iter().enumerate() {
                    s.push_str(&format!("    - storage: local-lvm\n      size: {g}GiB\n      mount-point: /data{i}\n"));
                    if ro.is_some() || backup.is_some() || mo.is_some() {
                        s.push_str("      options:\n");
                        if let Some(b) = ro { s.push_str(&format!("        read-only: {b}\n")); }
                        if let Some(b) = backup { s.push_str(&format!("        backup: {b}\n")); }
                        if let Some(m) = mo { s.push_str(&format!("        mount-options: {m}\n")); }
                    }
                }
            }
            if !binds.is_empty() {
                s.push_str("  bind-mounts:\n");
                for (i, ro) in binds.iter().enumerate() {
                    s.push_str(&format!("    - host-path: /srv/share{i}\n      mount-point: /mnt/share{i}\n"));
                    if let Some(b) = ro { s.push_str(&format!("      read-only: {b}\n")); }
                }
            }
            s.push_str("  networks:\n");
            for (i, (iface, tag, mac, fw, ip)) in nics.iter().enumerate() {
                s.push_str("    - bridge: vmbr0\n");
                if let Some(n) = iface { s.push_str(&format!("      iface: {n}{i}\n")); }
                if let Some(t) = tag { s.push_str(&format!("      tag: {t}\n")); }
                if let Some(m) = mac { s.push_str(&format!("      hwaddr: BC:24:11:00:CD:{m:02X}\n")); }
                if let Some(f) = fw { s.push_str(&format!("      firewall: {f}\n")); }
                if let Some(a) = ip { s.push_str(&format!("      ip: {a}\n")); }
            }
            if dns { s.push_str("  dns:\n    hostname: gen-host\n    nameservers: [1.1.1.1, 9.9.9.9]\n    domain: home.arpa\n"); }
            let names = ["unprivileged", "protection", "nesting", "onboot", "console"];
            let opts: String = names.iter().zip(&flags).filter_map(|(n, b)| b.map(|b| format!("    {n}: {b}\n"))).collect();
            if !opts.is_empty() { s.push_str("  options:\n"); s.push_str(&opts); }
            s
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

        #[test]
        fn generated_container_reads_back_without_drift(doc in ct_doc()) {
            let c = cluster(&[&doc]);
            let o = object(&c, "gen");
            let secrets = CloudInitSecrets::default();
            let ctx = Context { cluster: &c, secrets: &secrets };
            let (node, vmid) = o.spec.guest_id().unwrap();
            let mut snap = LiveSnapshot::default();
            let work = Work::CreateGuest { guest_type: GuestType::Lxc, params: create_params(o, &ctx).unwrap(), mark_template: o.r#ref.kind.is_template() };
            sim::apply(&mut snap, node, &Target::Guest(vmid), &work);
            let live = snap.guest(node, vmid).unwrap();
            let d = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            prop_assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{doc}\n{:#?}\n{:#?}\n{:#?}", d.changes, d.anomalies, live.config);
        }
    }
}

mod pending_semantics {
    //! The same round trip through the planner, with the simulated PVE
    //! keeping pending what real PVE keeps pending (support/sim.rs): every
    //! demo object is created, the plan applied, and the re-plan is empty —
    //! nothing waits for a restart. A hand edit of a running guest is
    //! converged by an update whose pending part a reboot applies.
    use super::*;
    use proxops_core::action::{Op, SkipReason};
    use proxops_core::config::RestartPolicy;
    use proxops_core::live::Power;
    use proxops_core::plan::{Plan, Policy};

    fn replan(
        c: &proxops_core::repo::ClusterDesired,
        live: &LiveSnapshot,
        policy: &Policy,
    ) -> Plan {
        let secrets = CloudInitSecrets::default();
        let ctx = Context {
            cluster: c,
            secrets: &secrets,
        };
        proxops_core::planner::plan(c, live, &ctx, policy)
    }

    fn execute(plan: &Plan, live: &mut LiveSnapshot) {
        for a in &plan.actions {
            sim::apply(live, &a.node, &a.target, &a.work);
        }
    }

    fn empty_pve(c: &proxops_core::repo::ClusterDesired) -> LiveSnapshot {
        support::sim_pve::empty_snapshot(c)
    }

    #[test]
    fn every_demo_object_created_and_applied_replans_empty() {
        let policy = Policy {
            prune_budget: 0,
            ..Default::default()
        };
        let mut checked = 0;
        for c in demo::clusters() {
            let mut live = empty_pve(&c);
            let first = replan(&c, &live, &policy);
            assert!(
                first.anomalies.is_empty(),
                "{}: {:#?}",
                c.name,
                first.anomalies
            );
            execute(&first, &mut live);
            let again = replan(&c, &live, &policy);
            assert!(
                again.actions.is_empty() && !again.waits_for_restart(),
                "{}: {:#?}\n{:#?}",
                c.name,
                again.actions,
                again.skipped
            );
            assert!(again.is_empty(), "{}: {:#?}", c.name, again);
            checked += c.objects.len();
        }
        assert!(checked >= 10, "only {checked} objects checked");
    }

    #[test]
    fn a_pending_update_waits_for_a_restart_and_a_reboot_converges_it() {
        let mut rebooted = 0;
        for c in demo::clusters() {
            let mut live = empty_pve(&c);
            let never = Policy {
                prune_budget: 0,
                ..Default::default()
            };
            execute(&replan(&c, &live, &never), &mut live);
            // Someone switched the agent off by hand on every running VM that
            // should have it (and restarted it: nothing pending).
            let mut touched = Vec::new();
            for g in live.guests.values_mut() {
                if g.power != Power::Running || g.guest_type != GuestType::Qemu {
                    continue;
                }
                let cfg = g.config.as_mut().unwrap();
                if !cfg.values.contains_key("agent") {
                    continue;
                }
                cfg.values.insert("agent".into(), "0".into()).unwrap();
                touched.push(g.vmid);
            }
            let plan = replan(&c, &live, &never);
            for vmid in &touched {
                // The manifest says agent 1: an update, which PVE keeps
                // pending on the running guest.
                let update = plan
                    .actions
                    .iter()
                    .find(|a| a.target == Target::Guest(*vmid) && a.op == Op::Update)
                    .unwrap_or_else(|| panic!("{}: {vmid}: {:#?}", c.name, plan.actions));
                sim::apply(&mut live, &update.node, &update.target, &update.work);
            }
            let waiting = replan(&c, &live, &never);
            for vmid in &touched {
                let skip = waiting
                    .skipped
                    .iter()
                    .find(|s| s.id == Target::Guest(*vmid))
                    .unwrap_or_else(|| panic!("{}: {vmid}: {:#?}", c.name, waiting));
                assert!(
                    matches!(&skip.reason, SkipReason::PendingRestart { keys } if keys == &["agent"]),
                    "{skip:?}"
                );
            }
            let reboot = Policy {
                restart_policy: RestartPolicy::Reboot,
                ..never
            };
            let plan = replan(&c, &live, &reboot);
            assert_eq!(
                plan.actions.iter().filter(|a| a.op == Op::Reboot).count(),
                touched.len(),
                "{}: {:#?}",
                c.name,
                plan.actions
            );
            execute(&plan, &mut live);
            let done = replan(&c, &live, &reboot);
            assert!(done.is_empty(), "{}: {:#?}", c.name, done);
            rebooted += touched.len();
        }
        assert!(rebooted > 0, "no demo VM runs with the agent on");
    }
}
