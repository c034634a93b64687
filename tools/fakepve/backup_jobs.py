"""Backup jobs (`/cluster/backup`) with state, as pve-manager keeps them in jobs.cfg.

fakepve 0.5.0 answers these paths with made-up values and keeps nothing. This follows
pve-manager `PVE/API2/Backup.pm` (index, create_job, read_job, update_job, delete_job and
`$schedule_param_check`), `PVE/VZDump.pm` (`verify_vzdump_parameters`, `option_exists`),
pve-guest-common `PVE/VZDump/JobBase.pm` (property strings decoded into objects),
pve-common `PVE/Job/Registry.pm` (`enabled` defaults to 1) and pve-storage
`PVE/Storage/Plugin.pm` (`prune-backups` and `validate_prune_backups`).

As real PVE answers: `prune-backups` (and `fleecing`, `performance`) come back as objects whose
values are the text they were parsed from (`{"keep-last": "4"}`; `keep-all` alone is the number
1), while booleans and integers are numbers (SectionConfig `check_value`). Schedules are checked
as PVE checks them (pve_calendar). Not modelled: `next-run` (when the schedule next fires), the
legacy vzdump.cron jobs, running a job.
"""

import uuid

from fakepve import schema as pve_schema
from fakepve.model import PveError
from fakepve.routing import die, param_error, split_list

import pve_calendar

ALL_DAYS = 'mon,tue,wed,thu,fri,sat,sun'

# pve-storage `Plugin.pm` `$prune_backups_format`.
PRUNE_KEEP = ('keep-last', 'keep-hourly', 'keep-daily', 'keep-weekly', 'keep-monthly', 'keep-yearly')

# The Job::Registry options beside vzdump's own (`JobBase->options`); only these two of them
# may be deleted (update_job's `$deletable`), besides any vzdump option.
JOB_OPTIONS = ('id', 'schedule', 'starttime', 'dow', 'enabled', 'repeat-missed', 'comment')
DELETABLE = ('comment', 'repeat-missed')


def vzdump_options():
    """`PVE::VZDump::option_exists`: the vzdump options, as the schema of POST lists them."""
    props = pve_schema.load().paths['/cluster/backup']['POST']['parameters']['properties']
    return frozenset(k for k in props if k not in JOB_OPTIONS)


class ClusterBackupJobs(object):
    """Mixin of FakePve: `/cluster/backup`. Needs `pools` (fakepve's pool state)."""

    def _backup_init(self):
        self.backup_jobs = {}  # id -> options, in jobs.cfg order (creation)

    def _routes_launcher_backup(self):
        return [('GET', '/cluster/backup', self._backup_list),
                ('POST', '/cluster/backup', self._backup_create),
                ('GET', '/cluster/backup/{id}', self._backup_read),
                ('PUT', '/cluster/backup/{id}', self._backup_update),
                ('DELETE', '/cluster/backup/{id}', self._backup_delete)]

    def _backup_doc(self, job_id):
        doc = dict(self.backup_jobs[job_id], id=job_id, type='vzdump')
        for key in ('prune-backups', 'fleecing', 'performance'):
            if key in doc:
                doc[key] = dict(doc[key])
        return doc

    async def _backup_list(self, v, user):
        return [self._backup_doc(i) for i in self.backup_jobs]

    async def _backup_read(self, v, user):
        if v['id'] not in self.backup_jobs:
            raise param_error(id="No such job '{0}'".format(v['id']))
        return self._backup_doc(v['id'])

    async def _backup_create(self, v, user):
        return self.backup_create(v)

    def backup_create(self, v):
        """`create_job` (also how a seed file's jobs are made)."""
        param = _checked_formats(dict(v))
        self._backup_pool_exists(param)
        _schedule_param_check(param, True)
        param.setdefault('enabled', 1)
        job_id = param.pop('id', None) or str(uuid.uuid4())
        if job_id in self.backup_jobs:
            raise die("Job '{0}' already exists".format(job_id))
        _verify(param, True)
        self.backup_jobs[job_id] = param
        return None

    async def _backup_update(self, v, user):
        param = _checked_formats(dict(v))
        job_id = param.pop('id')
        delete = split_list(param.pop('delete', None) or '')
        self._backup_pool_exists(param)
        _schedule_param_check(param, False)
        if not param and not delete:
            raise die('no options specified')
        _verify(param, False)
        if job_id not in self.backup_jobs:
            raise die('no such vzdump job')
        job = dict(self.backup_jobs[job_id])
        options = vzdump_options()
        for key in delete:
            if key not in options and key not in DELETABLE:
                raise param_error(delete="unknown option '{0}'".format(key))
            job.pop(key, None)
        job.update(param)
        if job.get('exclude') is not None and job.get('pool') is None:
            job['all'] = 1
        # One selection at a time: what was sent wins over what the job had.
        if param.get('vmid') is not None:
            drop = ('all', 'exclude', 'pool')
        elif param.get('all'):
            drop = ('vmid', 'pool')
        elif job.get('pool'):
            drop = ('vmid', 'all', 'exclude')
        else:
            drop = ()
        for key in drop:
            job.pop(key, None)
        _verify(job, True)
        self.backup_jobs[job_id] = job
        return None

    async def _backup_delete(self, v, user):
        if v['id'] not in self.backup_jobs:
            raise param_error(id="No such job '{0}'".format(v['id']))
        del self.backup_jobs[v['id']]
        return None

    def _backup_pool_exists(self, param):
        """`$rpcenv->check_pool_exist` (a permission exception)."""
        pool = param.get('pool')
        if pool and pool not in self.pools:
            raise PveError(403, "Permission check failed (pool '{0}' does not exist)".format(pool))

    def _backup_forget_guest(self, vmid):
        """pve-guest-common `VZDump/Plugin.pm` `remove_vmid_from_backup_jobs` (a destroy with
        purge): the guest leaves every job's `vmid` list (a job left without guests goes) or
        `exclude` list."""
        for job_id in list(self.backup_jobs):
            job = self.backup_jobs[job_id]
            key = 'vmid' if job.get('vmid') is not None else 'exclude' if job.get('exclude') is not None else None
            if key is None:
                continue
            rest = [i for i in split_list(job[key]) if i != str(vmid)]
            if rest:
                job[key] = ','.join(rest)
            elif key == 'vmid':
                del self.backup_jobs[job_id]
            else:
                del job[key]


def _checked_formats(param):
    """The parameter formats fakepve's schema check does not know: `pve-calendar-event` and
    `prune-backups` (PVE checks them with the other parameters: a 400)."""
    errors = {}
    schedule = param.get('schedule')
    if schedule is not None:
        why = pve_calendar.error(schedule)
        if why:
            errors['schedule'] = "invalid format - invalid calendar event '{0}' - {1}\n".format(schedule, why)
    for key, parse in (('prune-backups', _prune_backups), ('fleecing', _property_string),
                       ('performance', _property_string)):
        if isinstance(param.get(key), str):
            try:
                param[key] = parse(param[key])
            except ValueError as exc:
                errors[key] = 'invalid format - {0}\n'.format(exc)
    if errors:
        raise PveError(400, 'Parameter verification failed.', errors)
    return param


def _property_string(text):
    out = {}
    for part in text.split(','):
        if part:
            key, eq, value = part.partition('=')
            out[key if eq else 'enabled'] = value if eq else key
    return out


def _prune_backups(text):
    """`parse_property_string('prune-backups', ...)` and `validate_prune_backups`: numbers of
    backups to keep (at least 0) or `keep-all`; nothing above 0 means keep all."""
    keep = _property_string(text)
    for key, value in keep.items():
        if key == 'keep-all':
            if value not in ('0', '1'):
                raise ValueError('format error\nkeep-all: type check (\'boolean\') failed - got \'{0}\''.format(value))
        elif key not in PRUNE_KEEP:
            raise ValueError('format error\n{0}: property is not defined in schema and the schema does not '
                             'allow additional properties'.format(key))
        elif not value.isdigit():
            raise ValueError("format error\n{0}: type check ('integer') failed - got '{1}'".format(key, value))
    keep_all = keep.pop('keep-all', '0') == '1'
    if not any(int(v) > 0 for v in keep.values()):
        return {'keep-all': 1}
    if keep_all:
        raise ValueError('keep-all cannot be set together with other options.')
    return keep


def _schedule_param_check(param, required):
    """Backup.pm `$schedule_param_check`: `starttime` (and `dow`) become a `schedule`."""
    if param.get('schedule') is not None:
        if param.get('starttime') is not None:
            raise param_error(starttime="'starttime' and 'schedule' cannot both be set")
    elif param.get('starttime') is None:
        if required:
            raise param_error(schedule="neither 'starttime' nor 'schedule' were set")
    else:
        dow = ','.join(split_list(param.get('dow') or ''))
        start = param['starttime']
        param['schedule'] = start if not dow or dow == ALL_DAYS else '{0} {1}'.format(dow, start)
    param.pop('starttime', None)
    param.pop('dow', None)


def _verify(param, check_missing):
    """VZDump.pm `verify_vzdump_parameters`: one selection, `exclude` meaning `all`."""
    for key in ('all', 'exclude', 'pool'):
        if param.get(key) and param.get('vmid'):
            raise param_error(**{key: "option conflicts with option 'vmid'"})
    if param.get('exclude') is not None and not param.get('pool'):
        param['all'] = 1
    if check_missing and not (param.get('all') or param.get('stop') or param.get('pool')) and not param.get('vmid'):
        raise param_error(vmid='property is missing')
