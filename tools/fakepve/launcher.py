#!/usr/bin/env python3
"""Serve the fakepve PVE stand-in for ProxOps tests, seeded from a JSON file.

What this owns: one FakePve instance on a loopback address (HTTPS, with a
certificate made for that address), and a plain-HTTP control port on the same
loopback address through which a test injects faults, changes settings and
reads what the client sent. It never listens on anything but loopback.

Usage (the Rust harness proxops_pve::fakepve runs this):

  launcher.py SEED.json --host 127.3.4.5 --state-dir DIR [--port 8006]
      [--control-port 8007] [--time-scale 0] [--user root@pam] [--exit-with-stdin]
      [--also-host 127.3.4.6]

--also-host serves the same fake PVE on a second loopback address (same port,
same certificate, which names both): one PVE behind two names, as two DNS names
or a name and an address are in real life.

The login password is read from $PROXOPS_FAKEPVE_PASSWORD (default "secret"),
never from the command line, so it does not show in the process list.

When both ports listen, one line of JSON goes to stdout:
  {"url": "https://127.3.4.5:8006", "control": "http://127.3.4.5:8007",
   "cafile": "DIR/fakepve.crt", "fingerprint": "AB:CD:...",
   "also_url": "https://127.3.4.6:8006" (with --also-host only)}
Errors go to stderr; exit status 3 means an address was already in use.

Seed file keys (all optional):
  nodes     ["pve2", ...]                       extra cluster nodes
  storages  {"local": {"type": "dir", "content": "iso,import", ...}}  add or replace
  files     [{"storage", "name", "size", "content"}]   e.g. ISOs, vztmpl archives
  tokens    {"root@pam!proxops": "<secret>"}     API tokens fakepve accepts
  users     {"alice@pve": "<password>"}          extra password logins
  guests    [{"vmid", "name", "node", "status", "type": "qemu"|"lxc", "template",
              "lock", "pool", "ostemplate", "config": {...}, "pending": {...}, "attrs": {...}}]
            ("pending": key -> value the next start takes, null for a queued removal;
            GET .../pending also lists the digest, as real PVE does)
  settings  {"version": "9.2.0", "ticket_ttl": 7200, ...}   see SETTINGS
  pools     {"web": {"comment": "..."}}           resource pools (guests join with "pool")
  ha_resources  [{"sid": "vm:100", "state": "started", "comment": ...}]
            HA resources the manager already carries out (see ClusterHaReplication)
  ha_rules  [{"rule": "db-first", "type": "node-affinity", "resources": "vm:100",
              "nodes": "pve1:2,pve2", ...}]      HA rules (ha_rules.py)
  backup_jobs   [{"id": "nightly", "schedule": "21:00", "vmid": "100", ...}]
            backup jobs (backup_jobs.py), given as PVE's API takes them
  replication   [{"id": "100-0", "target": "pve2", "schedule": "*/15"}]
            replication jobs (`<guest>-<jobnum>`; nothing is replicated)
  acl       [["alice@pve", "/vms", ["VM.Audit"]], ...]   grants (the first one switches ACLs on)
  privsep   ["alice@pve!ci", ...]   API tokens with privilege separation: a token
            holds a privilege only where both it and its user do

Control port (JSON in, JSON out):
  POST /call      {"fn": NAME, "args": [...], "kwargs": {...}}  NAME from CALLABLE
  POST /guest     {"vmid": 100, "set": {"shutdown_secs": 90}}   guest attributes
  POST /settings  {"time_scale": 0.01, ...}                      names from SETTINGS
  POST /clear     drop injected failures and network faults
  GET  /requests  [[method, path, body], ...] what the client sent, secrets redacted
  DELETE /requests  forget them
"""
import argparse
import asyncio
import errno
import hashlib
import inspect
import ipaddress
import json
import os
import re
import sys
import threading
import time

from aiohttp import web
from fakepve import FakePve
from fakepve import schema as pve_schema
from fakepve.certs import make_cert
from fakepve.model import PveError
from fakepve.routing import split_list

import pve_calendar
from backup_jobs import ClusterBackupJobs
from ha_rules import ClusterHaRules

# FakePve methods a test may call through POST /call.
CALLABLE = frozenset((
    'fail', 'add_node', 'set_node_offline', 'lose_quorum', 'regain_quorum', 'snapshot_lock', 'unlock',
    'hold_config_lock', 'release_config_lock', 'backup', 'migrate', 'slow_network', 'flaky_network',
    'revoke_tickets', 'store_file', 'grant', 'ceph_slow', 'ceph_down', 'ceph_recover', 'add_ceph_storage',
))

# FakePve attributes a test may set through POST /settings or the seed's "settings".
SETTINGS = frozenset((
    'time_scale', 'latency', 'ticket_ttl', 'lock_wait', 'shutdown_default_timeout', 'ha_delay', 'quorate',
    'tfa', 'version', 'release_version', 'cluster_name', 'max_requests', 'body_timeout', 'ha_lag',
    'repl_lag',
))

# Guest attributes a test may set through POST /guest or a seeded guest's "attrs".
GUEST_ATTRS = frozenset((
    'shutdown_secs', 'start_secs', 'stop_secs', 'start_error', 'acpi', 'ha_state', 'agent', 'agent_hangs',
    'stats', 'lock', 'status', 'qmpstatus',
))

EXIT_ADDRESS_IN_USE = 3


class ClusterHaReplication(object):
    """Mixin of FakePve: HA resources and replication jobs, with state.

    fakepve 0.5.0 answers `/cluster/ha/*` and `/cluster/replication` with
    made-up values of the schema's shape (a client would see an HA resource
    and jobs that do not exist) and never changes a thing. This models them
    as PVE does, for ProxOps' power and prune decisions and for later work
    that reconciles HA resources and replication jobs themselves:

    HA resources (pve-ha-manager `API2/HA/Resources.pm`, `HA/Config.pm`):
      GET/POST `/cluster/ha/resources`, GET/PUT/DELETE `/cluster/ha/resources/{sid}`.
      A resource's requested `state` is kept on the guest (`ha_state`, which
      fakepve shows as `hastate` in `/cluster/resources` and in
      `status/current`'s `ha`). A changed request is carried out by "the
      manager" after `ha_delay` PVE seconds plus `ha_lag` real seconds
      (a setting, default 0.3 s, so that a client must wait as it must on
      PVE): `started` starts the guest (pending changes applied), `stopped`
      and `disabled` stop it. Until then `GET /cluster/ha/status/current`
      reports the service as the manager sees it (`crm_state`, and `state`
      as `get_verbose_service_state` words it: `starting`, `stopping`, …).
      A resource's `group` is refused: this cluster has no HA groups, so
      they count as migrated to rules (`have_groups_been_migrated`); a
      delete with `purge` (the default) also takes the resource out of the
      HA rules (ha_rules.py).
    Replication jobs (pve-guest-common `ReplicationConfig.pm`, pve-manager
      `API2/ReplicationConfig.pm`): GET/POST `/cluster/replication`,
      GET/PUT/DELETE `/cluster/replication/{id}`; ids are `<guest>-<jobnum>`,
      one job per guest and target, never to the guest's own node, and only
      for a guest with a volume on ZFS pool storage ("No replicatable
      volumes found"). A delete marks the job (`remove_job`); the runner
      removes it a PVE minute plus `repl_lag` real seconds (a setting,
      default 0.3 s) later, as pvescheduler does, and until then it is
      listed and still keeps its guest from being destroyed without purge.
      `force` removes it at once. Nothing is replicated.
    Destroying a guest (qemu-server `API2/Qemu.pm` `destroy_vm`,
      pve-container `API2/LXC.pm` `destroy_vm`): without `purge`, an HA
      resource in any state ("used in HA resources and purge parameter not
      set") or a replication job ("There is a replication job …") refuses
      it; with `purge` both are removed.

    Not modelled: HA groups, migration, fencing, the `ignored`
    state's direct power (fakepve routes every power call of a guest with
    an HA state through its own HA request), the CRM's command queue.
    """

    def _ha_init(self):
        self.ha_resources = {}       # sid -> {'comment': ..., 'max_restart': ..., ...}
        self.ha_pending = {}         # sid -> the manager's state until it acts
        self.replication_jobs = {}   # id -> job
        self.ha_lag = 0.3
        self.repl_lag = 0.3
        self._ha_rules_init()
        self._backup_init()

    # ---------------------------------------------------------------- HA

    def _routes_launcher_ha(self):
        return [('GET', '/cluster/ha/resources', self._ha_list),
                ('POST', '/cluster/ha/resources', self._ha_create),
                ('GET', '/cluster/ha/resources/{sid}', self._ha_read),
                ('PUT', '/cluster/ha/resources/{sid}', self._ha_update),
                ('DELETE', '/cluster/ha/resources/{sid}', self._ha_delete),
                ('GET', '/cluster/ha/status/current', self._ha_status)]

    def _ha_sid(self, text):
        """pve-ha-manager `HA/Config.pm` `parse_sid`: `vm:100`, `ct:100` or `100`."""
        from fakepve.routing import die
        m = re.fullmatch(r'(?:(vm|ct):)?(\d+)', str(text))
        if not m:
            raise die("unable to parse service id '{0}'".format(text))
        kind, vmid = m.group(1), int(m.group(2))
        guest = self.guest(vmid)
        if kind is None:
            if guest is None:
                raise die("unable to find VM '{0}'".format(vmid))
            kind = 'ct' if self.ct(vmid) is not None else 'vm'
        return '{0}:{1}'.format(kind, vmid), guest

    def _ha_digest(self):
        from fakepve.routing import sha1
        return sha1(json.dumps({sid: dict(r, state=self._ha_state(sid))
                                for sid, r in self.ha_resources.items()}, sort_keys=True))

    def _ha_state(self, sid):
        guest = self.guest(int(sid.split(':')[1]))
        return guest.ha_state if guest is not None else None

    def _ha_doc(self, sid):
        """`$api_copy_config`: the options as configured (a `state` only when one was set)."""
        doc = dict(self.ha_resources[sid], sid=sid, type=sid.split(':')[0])
        doc['digest'] = self._ha_digest()
        return doc

    async def _ha_list(self, v, user):
        return [self._ha_doc(sid) for sid in sorted(self.ha_resources)
                if not v.get('type') or v['type'] == sid.split(':')[0]]

    async def _ha_read(self, v, user):
        from fakepve.routing import die
        sid, _ = self._ha_sid(v['sid'])
        if sid not in self.ha_resources:
            raise die("no such resource '{0}'".format(sid))
        return self._ha_doc(sid)

    def _ha_options(self, v):
        """`check_config` of the VM/CT plugin's options. HA groups are gone: this cluster has
        no ha/groups.cfg, so `have_groups_been_migrated` holds (`API2/HA/Resources.pm`)."""
        from fakepve.routing import die
        if v.get('group') is not None:
            raise die("invalid parameter 'group': ha groups have been migrated to rules")
        if '\n' in (v.get('comment') or '') or '\r' in (v.get('comment') or ''):
            raise die('property contains a line feed')  # SectionConfig `check_value`
        return {k: v[k] for k in ('state', 'comment', 'max_restart', 'max_relocate', 'failback')
                if v.get(k) is not None}

    async def _ha_create(self, v, user):
        from fakepve.routing import die
        sid, guest = self._ha_sid(v['sid'])
        if guest is None:
            raise die("{0} '{1}' does not exist".format(
                'VM' if sid.startswith('vm') else 'CT', sid.split(':')[1]))
        if sid in self.ha_resources:
            raise die("resource ID '{0}' already defined".format(sid))
        self.ha_resources[sid] = self._ha_options(v)
        self._ha_request(sid, guest, v.get('state') or 'started')
        return None

    async def _ha_update(self, v, user):
        from fakepve.routing import check_digest, die
        sid, guest = self._ha_sid(v['sid'])
        if sid not in self.ha_resources:
            raise die("no such resource '{0}'".format(sid))
        check_digest(self._ha_digest(), v.get('digest'))
        options = self._ha_options(v)
        deleted = [k.strip() for k in (v.get('delete') or '').split(',') if k.strip()]
        for key in deleted:  # `update_single_resource_config_inplace`
            if key not in ('state', 'comment', 'max_restart', 'max_relocate', 'failback', 'group'):
                raise die("update resources config failed: no such option '{0}'".format(key))
        self.ha_resources[sid].update(options)
        for key in deleted:
            self.ha_resources[sid].pop(key, None)
        if v.get('state'):
            self._ha_request(sid, guest, v['state'])
        elif 'state' in deleted:
            self._ha_request(sid, guest, 'started')
        return None

    async def _ha_delete(self, v, user):
        from fakepve.routing import die
        sid, guest = self._ha_sid(v['sid'])
        if sid not in self.ha_resources:
            raise die("cannot delete service '{0}', not HA managed!".format(sid))
        self._ha_forget(sid, guest, v.get('purge', 1))
        return None

    def _ha_forget(self, sid, guest, purge):
        """`delete_service_from_config`: with purge (the API's default) the resource also
        leaves every HA rule, and a rule left without resources goes."""
        self.ha_resources.pop(sid, None)
        self.ha_pending.pop(sid, None)
        if guest is not None:
            guest.ha_state = None
        if purge:
            self._rules_forget_resource(sid)

    def _ha_request(self, sid, guest, state):
        """Records the requested state; the manager acts later."""
        crm = self._ha_crm(sid, guest)
        guest.ha_state = state
        if state == 'ignored':
            self.ha_pending.pop(sid, None)
            return
        self.ha_pending[sid] = crm
        asyncio.ensure_future(self._ha_manage(sid, guest, state))

    async def _ha_manage(self, sid, guest, state):
        await self.pause(self.ha_delay)
        await asyncio.sleep(self.ha_lag)
        if self.ha_resources.get(sid) is None or guest.ha_state != state:
            return
        if state == 'started' and guest.status != 'running':
            if self.ct(guest.vmid) is not None:
                self._apply(guest)
                guest.pid = next(self._ct_pids)
            else:
                guest.apply_pending()
                guest.qmpstatus = 'running'
            guest.status = 'running'
            guest.started_at = time.time()
        elif state in ('stopped', 'disabled') and guest.status == 'running':
            guest.status = 'stopped'
            if self.ct(guest.vmid) is not None:
                guest.pid = None
            else:
                guest.qmpstatus = 'stopped'
        self.ha_pending.pop(sid, None)

    def _ha_crm(self, sid, guest):
        """The manager's own state of a service: `started` or `stopped`."""
        if sid in self.ha_pending:
            return self.ha_pending[sid]
        return 'started' if guest is not None and guest.status == 'running' else 'stopped'

    async def _ha_status(self, v, user):
        """pve-ha-manager `API2/HA/Status.pm` `current`, services as
        `HA/Tools.pm` `get_verbose_service_state` words them."""
        now = int(time.time())
        master = sorted(self.nodes)[0] if self.nodes else 'pve1'
        out = [{'id': 'quorum', 'type': 'quorum', 'node': master, 'quorate': 1, 'status': 'OK'},
               {'id': 'master', 'type': 'master', 'node': master, 'timestamp': now,
                'status': '{0} (active, {1})'.format(master, time.strftime('%c', time.gmtime(now)))}]
        for sid in sorted(self.ha_resources):
            guest = self.guest(int(sid.split(':')[1]))
            req = self._ha_state(sid) or 'started'
            crm = self._ha_crm(sid, guest)
            state = crm
            if req == 'ignored':
                state = 'ignored'
            elif crm == 'stopped' and req == 'started':
                state = 'starting'
            elif crm == 'started' and req in ('stopped', 'disabled'):
                state = 'stopping'
            elif crm == 'stopped' and req == 'disabled':
                state = 'disabled'
            node = guest.node if guest is not None else '---'
            out.append({'id': 'service:' + sid, 'type': 'service', 'sid': sid, 'node': node,
                        'crm_state': crm, 'request_state': req, 'state': state,
                        'status': '{0} ({1}, {2})'.format(sid, node, state)})
        return out

    # ------------------------------------------------------- replication

    def _routes_launcher_replication(self):
        return [('GET', '/cluster/replication', self._repl_list),
                ('POST', '/cluster/replication', self._repl_create),
                ('GET', '/cluster/replication/{id}', self._repl_read),
                ('PUT', '/cluster/replication/{id}', self._repl_update),
                ('DELETE', '/cluster/replication/{id}', self._repl_delete)]

    def _repl_job(self, spec):
        """A job as `ReplicationConfig.pm` stores it: `<guest>-<jobnum>` (the guest id and the
        job number as parsed integers), its fixed `target`, `source` (the guest's node when
        created) and the options that were given (`schedule` defaults to `*/15` unstored)."""
        from fakepve.routing import die
        m = re.fullmatch(r'(\d+)-(\d+)', str(spec.get('id', '')))
        if not m:
            raise die("invalid replication job id '{0}'".format(spec.get('id')))
        if int(m.group(1)) < 100:  # `parse_replication_job_id`
            raise die("invalid replication job id '{0}' (guest IDs < 100 are reserved)".format(spec['id']))
        guest = self.guest(int(m.group(1)))
        if guest is None:
            raise die("Guest '{0}' does not exist.".format(m.group(1)))
        job = {'id': '{0}-{1}'.format(int(m.group(1)), int(m.group(2))), 'type': spec.get('type', 'local'),
               'guest': int(m.group(1)), 'jobnum': int(m.group(2)), 'target': spec['target'],
               'source': spec.get('source') or guest.node}
        job.update(self._repl_options(spec))
        return job

    @staticmethod
    def _repl_options(v):
        """The options a job keeps; `disable` only when set (a false one is not written)."""
        from fakepve.routing import die
        options = {k: v[k] for k in ('comment', 'rate', 'schedule', 'remove_job') if v.get(k) is not None}
        if v.get('disable'):
            options['disable'] = 1
        if v.get('schedule') is not None:
            why = pve_calendar.error(v['schedule'])
            if why:
                raise PveError(400, 'Parameter verification failed.', {
                    'schedule': "invalid format - invalid calendar event '{0}' - {1}\n".format(v['schedule'], why)})
        if '\n' in (v.get('comment') or ''):
            raise die('property contains a line feed')
        return options

    def _repl_digest(self):
        from fakepve.routing import sha1
        return sha1(json.dumps(self.replication_jobs, sort_keys=True))

    async def _repl_list(self, v, user):
        return [self.replication_jobs[i] for i in sorted(self.replication_jobs)]

    async def _repl_read(self, v, user):
        from fakepve.routing import die
        if v['id'] not in self.replication_jobs:
            raise die("no such replication job '{0}'".format(v['id']))
        return dict(self.replication_jobs[v['id']], digest=self._repl_digest())

    def _replicatable(self, guest):
        """`get_replicatable_volumes`: the guest's volumes on storage that can replicate
        (pve-storage: only ZFS pool storage has the `replicate` feature)."""
        volumes = []
        for key, value in sorted(guest.config.items()):
            volume = str(value).split(',')[0]
            store = volume.split(':')[0] if ':' in volume else None
            if store and self.storages.get(store, {}).get('type') == 'zfspool':
                volumes.append(volume)
        return volumes

    async def _repl_create(self, v, user):
        """pve-manager `API2/ReplicationConfig.pm` `create`."""
        from fakepve.routing import die
        m = re.fullmatch(r'(\d+)-(\d+)', str(v.get('id', '')))
        guest = self.guest(int(m.group(1))) if m else None
        if guest is None:
            raise die("Guest '{0}' does not exist.".format(m.group(1) if m else v.get('id')))
        if v['target'] not in self.nodes:
            raise die("Target '{0}' does not exist.".format(v['target']))
        if v.get('source') is not None and v['source'] != guest.node:
            raise die("Source '{0}' does not match current node of guest '{1}' ({2})".format(
                v['source'], guest.vmid, guest.node))
        if v['target'] == guest.node:
            raise die('Source and target must not be identical')
        if not self._replicatable(guest):
            raise die('No replicatable volumes found')
        job = self._repl_job(v)
        if job['id'] in self.replication_jobs:
            raise die("replication job '{0}' already exists".format(job['id']))
        for other in self.replication_jobs.values():  # `write_config`: one job per target
            if other['guest'] == job['guest'] and other['target'] == job['target']:
                raise die("replication job for guest '{0}' to target 'local/{1}' already exists".format(
                    job['guest'], job['target']))
        self.replication_jobs[job['id']] = job
        return None

    async def _repl_update(self, v, user):
        """`update`: the options but the fixed `target`; `delete` drops optional ones."""
        from fakepve.routing import check_digest, die
        check_digest(self._repl_digest(), v.get('digest'))
        job = self.replication_jobs.get(v['id'])
        if job is None:
            raise die("no such job '{0}'".format(v['id']))
        options = self._repl_options(v)
        if v.get('source') is not None:
            options['source'] = v['source']
        deleted = split_list(v.get('delete') or '')
        for key in deleted:
            if key == 'target':
                raise die("unable to delete fixed option 'target'")
            if key not in ('disable', 'comment', 'rate', 'schedule', 'remove_job', 'source'):
                raise die("no such option '{0}'".format(key))
        if 'disable' in v and not v.get('disable'):
            job.pop('disable', None)  # a false `disable` is not written
        job.update(options)
        for key in deleted:
            job.pop(key, None)
        return None

    async def _repl_delete(self, v, user):
        """`delete` marks the job (`remove_job`: `full`, or `local` with `keep`); the
        replication runner (pvescheduler, each minute) removes its snapshots, and with `full`
        the target's volumes, then the job itself. `force` drops the entry at once."""
        from fakepve.routing import die, param_error
        if v.get('force'):
            if v.get('keep'):
                raise param_error(keep="conflicts with parameter 'force'")
            self.replication_jobs.pop(v['id'], None)
            return None
        job = self.replication_jobs.get(v['id'])
        if job is None:
            raise die("no such job '{0}'".format(v['id']))
        job['remove_job'] = 'local' if v.get('keep') else 'full'
        asyncio.ensure_future(self._repl_runner(v['id']))
        return None

    async def _repl_runner(self, job_id):
        await self.pause(60)
        await asyncio.sleep(self.repl_lag)
        job = self.replication_jobs.get(job_id)
        if job is not None and job.get('remove_job'):
            del self.replication_jobs[job_id]

    # ----------------------------------------------------------- destroy

    def _refuse_destroy(self, guest, what, v):
        """`destroy_vm`'s early checks after protection: HA, replication."""
        if v.get('purge'):
            return
        kind = 'ct' if what == 'CT' else 'vm'
        if '{0}:{1}'.format(kind, guest.vmid) in self.ha_resources:
            raise PveError(500, 'unable to remove {0} {1} - used in HA resources and purge parameter not set.'
                           .format(what, guest.vmid))
        for job_id, job in sorted(self.replication_jobs.items()):
            if job['guest'] == guest.vmid:
                raise PveError(500, "There is a replication job '{0}' for guest '{1}' - Please remove that first."
                               .format(job_id, guest.vmid))

    def _purge(self, guest, what, v):
        if not v.get('purge'):
            return
        for job_id in [i for i, j in self.replication_jobs.items() if j['guest'] == guest.vmid]:
            del self.replication_jobs[job_id]
        sid = '{0}:{1}'.format('ct' if what == 'CT' else 'vm', guest.vmid)
        if sid in self.ha_resources:
            self._ha_forget(sid, guest, True)
        self._backup_forget_guest(guest.vmid)

    async def _qm_destroy(self, v, user):
        vm = self.find(v['node'], v['vmid'])
        self._qm_check_protection(vm, "can't remove VM {0}".format(vm.vmid))
        self._refuse_destroy(vm, 'VM', v)
        upid = await super()._qm_destroy(v, user)
        self._purge(vm, 'VM', v)
        return upid

    async def _lxc_destroy(self, user, v):
        ct = self._find_ct(v['node'], v['vmid'])
        self._check_protection(ct, "can't remove CT {0}".format(ct.vmid))
        self._refuse_destroy(ct, 'CT', v)
        upid = await super()._lxc_destroy(user, v)
        self._purge(ct, 'CT', v)
        return upid


class LauncherPve(ClusterHaReplication, ClusterHaRules, ClusterBackupJobs, FakePve):
    """FakePve with the qemu disk resize PVE does, and HA resources and
    replication jobs with state (`ClusterHaReplication`).

    fakepve 0.5.0 answers `PUT /nodes/{node}/qemu/{vmid}/resize` with a task that changes nothing
    (its container resize is modelled). This follows qemu-server src/PVE/API2/Qemu.pm `resize_vm`:
    a `resize` task that grows the drive's `size=` to the new absolute size (or adds a `+` size),
    fails on a CD drive, a missing disk or a smaller size, and leaves an equal size alone.
    """

    def _routes_launcher_qemu_resize(self):
        return [('PUT', '/nodes/{node}/qemu/{vmid}/resize', self._launcher_qm_resize)]

    async def _launcher_qm_resize(self, v, user):
        from fakepve.lxc import parse_size, format_size
        from fakepve.model import TaskError
        from fakepve.qemu import split_drive, join_drive, is_cdrom
        vm = self.find(v['node'], v['vmid'])
        disk, text = v['disk'], str(v['size'])

        async def body():
            if v.get('digest') and v['digest'] != vm.digest():
                raise TaskError('checksum mismatch (file change by other user?)')
            value = vm.config.get(disk)
            if not value:
                raise TaskError("disk '{0}' does not exist".format(disk))
            volume, props = split_drive(value)
            if is_cdrom(volume, props):
                raise TaskError("you can't resize a cdrom")
            request = parse_size(text.lstrip('+'))
            if request is None:
                raise TaskError('internal error')
            size = parse_size(props.get('size', '0')) or 0
            new = size + request if text.startswith('+') else request
            if new < size:
                raise TaskError('shrinking disks is not supported')
            if new != size:
                props['size'] = format_size(new)
                vm.config[disk] = join_drive(volume, props)
        return await self.task(vm.node, 'resize', vm.vmid, user, body, vm=vm)


class PrivsepPve(LauncherPve):
    """API tokens with privilege separation and PVE's answer to `GET /access/permissions?path=`.

    fakepve 0.5.0 gives a token its own grants plus its user's. PVE intersects them for a token
    with privilege separation (pve-access-control src/PVE/RPCEnvironment.pm `permissions`: the
    owning user's privileges on the path, filtered to those the token also holds). And for
    `?path=` PVE answers one entry, the effective privileges on that very path, inherited ones
    included (src/PVE/API2/AccessControl.pm `permissions`: `{ $path => $rpcenv->permissions(...) }`,
    or `{}` when there are none); fakepve lists the granted paths around it instead.
    """

    privsep = frozenset()

    def _acl_allows(self, who, path, priv):
        """Whether `who`'s own grants (not its user's) hold `priv` on `path`."""
        for granted, privs in (self.acl or {}).get(who, []):
            if priv in privs and (granted == '/' or path == granted or path.startswith(granted + '/')):
                return True
        return False

    def allowed(self, user, path, priv):
        if user in self.privsep and self.acl is not None:
            owner = user.split('!')[0]
            return super().allowed(owner, path, priv) and self._acl_allows(user, path, priv)
        return super().allowed(user, path, priv)

    async def _permissions(self, v, user):
        from fakepve import shapes
        who = v.get('userid') or user
        path = v.get('path')
        if path is None:
            return await super()._permissions(v, user)
        held = sorted(p for p in shapes.PRIVILEGES if self.acl is None or self.allowed(who, path, p))
        return {path: dict.fromkeys(held, 1)} if held else {}


class SeedError(Exception):
    """The seed file asks for something this launcher does not do."""


def apply_settings(pve, settings):
    unknown = sorted(set(settings) - SETTINGS)
    if unknown:
        raise SeedError('unknown settings: {0} (known: {1})'.format(', '.join(unknown), ', '.join(sorted(SETTINGS))))
    for key, value in settings.items():
        setattr(pve, key, value)


def set_guest_attrs(guest, attrs):
    unknown = sorted(set(attrs) - GUEST_ATTRS)
    if unknown:
        raise SeedError('unknown guest attributes: {0} (known: {1})'.format(
            ', '.join(unknown), ', '.join(sorted(GUEST_ATTRS))))
    for key, value in attrs.items():
        setattr(guest, key, value)


def seed(pve, spec):
    """Fill the fake cluster from the seed file's keys (see the module doc)."""
    known = {'nodes', 'storages', 'files', 'tokens', 'users', 'guests', 'settings', 'ha_resources',
             'replication', 'pools', 'ha_rules', 'backup_jobs', 'acl', 'privsep'}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise SeedError('unknown seed keys: {0}'.format(', '.join(unknown)))
    for node in spec.get('nodes', []):
        pve.add_node(node)
    for name, meta in sorted(spec.get('pools', {}).items()):
        pve.pools.setdefault(name, set())
        pve.pool_info[name] = {'comment': meta.get('comment'), 'storage': set()}
    for name, store in spec.get('storages', {}).items():
        merged = {'active': 1, 'files': set()}
        merged.update(store)
        pve.storages[name] = merged
    for g in spec.get('guests', []):
        common = dict(node=g.get('node', 'pve1'), status=g.get('status', 'stopped'), config=g.get('config', {}),
                      template=bool(g.get('template', False)), lock=g.get('lock'), pool=g.get('pool'),
                      pending=g.get('pending', {}))
        kind = g.get('type', 'qemu')
        if kind == 'lxc':
            guest = pve.add_ct(g['vmid'], g.get('name'), ostemplate=g.get('ostemplate'), **common)
        elif kind == 'qemu':
            guest = pve.add_vm(g['vmid'], g['name'], **common)
        else:
            raise SeedError('guest {0}: type must be qemu or lxc, not {1!r}'.format(g.get('vmid'), kind))
        set_guest_attrs(guest, g.get('attrs', {}))
    for f in spec.get('files', []):
        pve.store_file(f['storage'], f['name'], f.get('size', 1 << 20), f.get('content', 'iso'))
    pve.apitokens.update(spec.get('tokens', {}))
    pve.users.update(spec.get('users', {}))
    for who, path, privs in spec.get('acl', []):
        pve.grant(who, path, *privs)
    pve.privsep = frozenset(spec.get('privsep', []))
    apply_settings(pve, spec.get('settings', {}))
    for r in spec.get('ha_resources', []):
        seed_ha_resource(pve, r)
    for job in spec.get('replication', []):
        job = pve._repl_job(job)
        pve.replication_jobs[job['id']] = job
    for rule in spec.get('ha_rules', []):
        seed_call(pve.rule_create, rule)
    backup = pve_schema.load().paths['/cluster/backup']['POST']['parameters']
    for job in spec.get('backup_jobs', []):
        values, errors = pve_schema.validate(backup, job)
        if errors:
            raise SeedError('backup job {0}: {1}'.format(job, errors))
        seed_call(pve.backup_create, values)


def seed_call(create, values):
    """A seeded object made by its own API handler, so it is checked as PVE checks it."""
    try:
        create(dict(values))
    except PveError as exc:
        raise SeedError('{0}: {1} {2}'.format(values, exc.message, exc.errors or ''))


def seed_ha_resource(pve, r):
    """An HA resource the manager already carries out: its guest's power
    is as seeded, its requested state recorded."""
    sid, guest = pve._ha_sid(r['sid'])
    if guest is None:
        raise SeedError('ha resource {0}: no such guest'.format(r['sid']))
    pve.ha_resources[sid] = {k: r[k] for k in ('state', 'comment', 'max_restart', 'max_relocate', 'failback')
                             if k in r}
    guest.ha_state = r.get('state', 'started')


def redactor(pve):
    """A function that blanks every known secret (token secrets, passwords) in recorded text.

    fakepve already redacts password-like form and JSON fields and never records headers or
    query strings; this also catches a secret that turns up anywhere else in a body.
    """
    def secrets():
        values = [pve.password] + list(pve.users.values()) + list(pve.apitokens.values())
        return sorted((v for v in values if isinstance(v, str) and len(v) >= 4), key=len, reverse=True)

    def redact(text):
        for secret in secrets():
            text = text.replace(secret, '***')
        return text
    return redact


def with_pending_digest(pve):
    """List the config digest among `GET .../pending`'s entries, as real PVE does.

    pve-guest-common `GuestHelpers.pm` `config_with_pending_array` (which
    qemu-server's and pve-container's `vm_pending` return) walks every scalar
    key of the loaded config, `digest` included; fakepve 0.5.0 leaves it out.
    Without it a client reading /pending could not send the digest back.
    """
    qemu_pending, lxc_pending = pve._pending, pve._lxc_pending

    async def pending(request):
        response = await qemu_pending(request)
        if response.status != 200:
            return response
        vm = pve._vm(request)
        body = json.loads(response.body)
        body['data'].append({'key': 'digest', 'value': vm.digest()})
        return web.json_response(body)

    async def ct_pending(user, v):
        data = await lxc_pending(user, v)
        data.append({'key': 'digest', 'value': pve._find_ct(v['node'], v['vmid']).digest()})
        return data

    pve._pending, pve._lxc_pending = pending, ct_pending


def control_app(pve):
    redact = redactor(pve)

    def bad(message):
        return web.json_response({'error': message}, status=400)

    async def read_object(request):
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text='{"error": "expected a JSON object"}', content_type='application/json')
        return body

    async def call(request):
        body = await read_object(request)
        name = body.get('fn')
        if name not in CALLABLE:
            return bad('not callable: {0!r} (allowed: {1})'.format(name, ', '.join(sorted(CALLABLE))))
        try:
            result = getattr(pve, name)(*body.get('args', []), **body.get('kwargs', {}))
            if inspect.isawaitable(result):
                result = await result
        except (TypeError, ValueError, KeyError) as exc:
            return bad('{0}: {1}'.format(name, exc))
        return web.json_response({'result': None if result is None else str(result)})

    async def guest(request):
        body = await read_object(request)
        try:
            target = pve.guest(int(body['vmid']))
        except (KeyError, TypeError, ValueError):
            return bad('guest: "vmid" must be an integer')
        if target is None:
            return bad('guest: no guest {0}'.format(body['vmid']))
        try:
            set_guest_attrs(target, body.get('set', {}))
        except SeedError as exc:
            return bad(str(exc))
        return web.json_response({'result': None})

    async def settings(request):
        try:
            apply_settings(pve, await read_object(request))
        except SeedError as exc:
            return bad(str(exc))
        return web.json_response({'result': None})

    async def clear(request):
        pve.failures.clear()
        pve.flaky_network(0, 0)
        pve.slow_network(0)
        return web.json_response({'result': None})

    async def requests(request):
        return web.json_response([[m, p, redact(b.decode('utf-8', 'replace'))] for m, p, b in pve.requests])

    async def forget_requests(request):
        del pve.requests[:]
        return web.json_response({'result': None})

    app = web.Application()
    app.router.add_post('/call', call)
    app.router.add_post('/guest', guest)
    app.router.add_post('/settings', settings)
    app.router.add_post('/clear', clear)
    app.router.add_get('/requests', requests)
    app.router.add_delete('/requests', forget_requests)
    return app


def exit_when_stdin_closes(loop, stop):
    """The parent holds our stdin: when it goes away (even killed), so do we."""
    def watch():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except OSError:
            pass
        loop.call_soon_threadsafe(stop.set)
    threading.Thread(target=watch, daemon=True).start()


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(args):
    for host in [args.host] + ([args.also_host] if args.also_host else []):
        if not is_loopback(host):
            raise SystemExit('launcher: refusing to listen on {0!r}: only loopback addresses (127.0.0.0/8, ::1)'.format(
                host))
    with open(args.seed) as fh:
        spec = json.load(fh)
    password = os.environ.get('PROXOPS_FAKEPVE_PASSWORD') or 'secret'
    pve = PrivsepPve(user=args.user, password=password, host=args.host, port=args.port)
    pve._ha_init()
    pve.time_scale = args.time_scale
    with_pending_digest(pve)
    try:
        seed(pve, spec)
    except (SeedError, KeyError, TypeError, ValueError) as exc:
        raise SystemExit('launcher: bad seed file {0}: {1}'.format(args.seed, exc))

    os.makedirs(args.state_dir, exist_ok=True)
    hosts = (args.host, args.also_host) if args.also_host else (args.host,)
    certfile, keyfile, der = make_cert(args.state_dir, hosts=hosts)
    fingerprint = ':'.join('{0:02X}'.format(b) for b in hashlib.sha256(der).digest())
    with open(os.path.join(args.state_dir, 'fingerprint'), 'w') as fh:
        fh.write(fingerprint + '\n')

    control = web.AppRunner(control_app(pve), access_log=None)
    try:
        await pve.start(certfile, keyfile)
        if args.also_host:
            import ssl
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(certfile, keyfile)
            await web.TCPSite(pve.runner, args.also_host, pve.port, ssl_context=ctx).start()
        await control.setup()
        await web.TCPSite(control, args.host, args.control_port).start()
    except OSError as exc:
        print('launcher: cannot listen on {0}: {1}'.format(args.host, exc), file=sys.stderr, flush=True)
        sys.exit(EXIT_ADDRESS_IN_USE if exc.errno == errno.EADDRINUSE else 1)

    stop = asyncio.Event()
    if args.exit_with_stdin:
        exit_when_stdin_closes(asyncio.get_running_loop(), stop)
    ready = {'url': pve.url, 'control': 'http://{0}:{1}'.format(args.host, args.control_port),
             'cafile': certfile, 'fingerprint': fingerprint}
    if args.also_host:
        ready['also_url'] = 'https://{0}:{1}'.format(args.also_host, pve.port)
    print(json.dumps(ready), flush=True)
    await stop.wait()
    await control.cleanup()
    await pve.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('seed', help='seed JSON file')
    ap.add_argument('--host', default='127.0.0.2', help='loopback address to listen on')
    ap.add_argument('--port', type=int, default=8006)
    ap.add_argument('--control-port', type=int, default=8007)
    ap.add_argument('--state-dir', required=True, help='where the certificate, key and fingerprint go')
    ap.add_argument('--time-scale', type=float, default=0.0,
                    help='real seconds per PVE second; 0 (default) finishes every task before its POST returns')
    ap.add_argument('--user', default='root@pam', help='the password login user')
    ap.add_argument('--exit-with-stdin', action='store_true', help='exit when stdin reaches end of file')
    ap.add_argument('--also-host', help='a second loopback address serving the same fake PVE')
    try:
        asyncio.run(serve(ap.parse_args()))
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    main()
