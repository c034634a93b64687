//! One guest's manifest spec, by folding its kind's owned-key rows
//! backwards (`drift::adopt_vm`, `drift::adopt_ct`) from the defaults a
//! row leaves in place when PVE holds nothing for it.

use proxops_model::manifest::{
    CloudInitData, LxcCpu, LxcDns, LxcOptions, LxcRoot, LxcSpec, PowerState, VmCpu, VmHardware,
    VmOptions, VmSpec,
};
use proxops_model::names::{ResourceName, StorageId};
use proxops_model::units::Quantity;

use super::TEMPLATE_PLACEHOLDER;
use crate::inverse::GuestCx;

const MIB: u64 = 1 << 20;

/// A VM or TemplateVM.
pub(crate) fn vm(cx: &mut GuestCx<'_>, state: Option<PowerState>) -> VmSpec {
    let cpu = VmCpu {
        cpu_type: "kvm64".into(),
        cores: 1,
        limit: None,
        flags: Vec::new(),
    };
    let mut vm = VmSpec::minimal(
        cx.guest.node.clone(),
        cx.guest.vmid,
        Quantity::from_bytes(512 * MIB),
        cpu,
    );
    vm.state = state;
    crate::drift::adopt_vm(cx, &mut vm);
    vm.hardware = vm.hardware.filter(|h| *h != VmHardware::default());
    vm.options = vm.options.filter(|o| *o != VmOptions::default());
    vm.cloud_init_data = vm
        .cloud_init_data
        .filter(|c| *c != CloudInitData::default());
    vm
}

/// An LXC or TemplateCT; `None` when the container has no readable storage-backed rootfs.
pub(crate) fn ct(cx: &mut GuestCx<'_>, state: Option<PowerState>) -> Option<LxcSpec> {
    let mut ct = LxcSpec {
        node: cx.guest.node.clone(),
        vmid: cx.guest.vmid,
        template: ResourceName::new(TEMPLATE_PLACEHOLDER).unwrap_or_else(|_| cx.name.clone()),
        state,
        memory: Quantity::from_bytes(512 * MIB),
        swap: None,
        cpu: LxcCpu {
            cores: 1,
            units: None,
        },
        // Replaced by the rootfs row, or the container is not adopted.
        root: LxcRoot {
            storage: StorageId::new("local").ok()?,
            size: Quantity::from_bytes(0),
        },
        mount_points: Vec::new(),
        bind_mounts: Vec::new(),
        networks: Vec::new(),
        dns: None,
        arch: None,
        options: None,
        pve_description: None,
        tags: Vec::new(),
        pool: None,
        extra: Default::default(),
        firewall: None,
    };
    if !crate::drift::adopt_ct(cx, &mut ct) {
        return None;
    }
    ct.dns = ct.dns.filter(|d| *d != LxcDns::default());
    ct.options = ct.options.filter(|o| *o != LxcOptions::default());
    cx.incomplete.push(format!(
        "spec.template: PVE does not keep the template a container was created from (ostemplate); replace {TEMPLATE_PLACEHOLDER:?} with the CTTemplate's metadata.name"
    ));
    Some(ct)
}
