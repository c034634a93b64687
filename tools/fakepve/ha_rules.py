"""HA rules (`/cluster/ha/rules`, PVE 9) with state, as pve-ha-manager keeps them in ha/rules.cfg.

fakepve 0.5.0 answers these paths with made-up values and checks nothing (the schema states the
parameters as a `oneOf` per rule type, which its checker does not read). This follows
pve-ha-manager `src/PVE/API2/HA/Rules.pm` (create_rule, update_rule, delete_rule, index,
read_rule), `src/PVE/HA/Rules.pm` (the section config, `foreach_rule`, `get_next_ordinal`, the
checks between rule types), `src/PVE/HA/Rules/NodeAffinity.pm` and
`src/PVE/HA/Rules/ResourceAffinity.pm` (their options, value codecs and checks).

A rule that makes the rule set infeasible is refused at create and update
(`$assert_feasibility`) and listed with its `errors` otherwise. The launcher's cluster has no HA
groups (ha/groups.cfg absent: `have_groups_been_migrated` is true), so rules may always be
written. Not modelled: the transforms the manager applies when it compiles the rules.
"""

import hashlib
import json
import re

from fakepve import schema as pve_schema
from fakepve.model import PveError
from fakepve.routing import check_digest, die, split_list

# Options per rule type, with their schema (`properties` + `options` of each plugin and of the
# base plugin's `propertyList`); `resources` and `nodes` are checked by `_resources`/`_nodes`.
COMMON = {
    'resources': {'type': 'string'},
    'disable': {'type': 'boolean', 'optional': 1},
    'comment': {'type': 'string', 'maxLength': 4096, 'optional': 1},
}
TYPES = {
    'node-affinity': dict(COMMON, nodes={'type': 'string'}, strict={'type': 'boolean', 'optional': 1}),
    'resource-affinity': dict(COMMON, affinity={'type': 'string', 'enum': ['positive', 'negative']}),
}

# pve-ha-manager `HA/Tools.pm`: `pve_verify_ha_resource_id`, `parse_node_priority`.
RESOURCE_ID = re.compile(r'[a-z]+:\S+')
NODE_PRIORITY = re.compile(r'([a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?)(?::(\d+))?')


class ClusterHaRules(object):
    """Mixin of FakePve: `/cluster/ha/rules`. Needs `ha_resources` (the HA resource mixin)."""

    def _ha_rules_init(self):
        self.ha_rules = {}        # rule id -> {'type', 'resources': set, 'nodes': {node: prio}, ...}
        self.ha_rules_order = {}  # rule id -> ordinal

    def _routes_launcher_ha_rules(self):
        return [('GET', '/cluster/ha/rules', self._rules_list),
                ('POST', '/cluster/ha/rules', self._rules_create),
                ('GET', '/cluster/ha/rules/{rule}', self._rules_read),
                ('PUT', '/cluster/ha/rules/{rule}', self._rules_update),
                ('DELETE', '/cluster/ha/rules/{rule}', self._rules_delete)]

    # ------------------------------------------------------------ reading

    def _rules_digest(self):
        return hashlib.sha1(json.dumps(
            [[i, self.ha_rules_order[i], _encoded(r)] for i, r in sorted(self.ha_rules.items())],
            sort_keys=True).encode()).hexdigest()

    def _rule_doc(self, rule_id, errors):
        """`$get_api_ha_rule`: the rule as stored, lists encoded, with digest, order and errors."""
        doc = dict(_encoded(self.ha_rules[rule_id]), rule=rule_id, digest=self._rules_digest(),
                   order=self.ha_rules_order[rule_id])
        if rule_id in errors:
            doc['errors'] = {opt: ', '.join(msgs) for opt, msgs in sorted(errors[rule_id].items())}
        return doc

    async def _rules_list(self, v, user):
        errors = self._feasibility(self.ha_rules)
        ids = sorted(self.ha_rules, key=lambda i: self.ha_rules_order[i])
        return [self._rule_doc(i, errors) for i in ids
                if (not v.get('type') or self.ha_rules[i]['type'] == v['type'])
                and (not v.get('resource') or v['resource'] in self.ha_rules[i]['resources'])]

    async def _rules_read(self, v, user):
        if v['rule'] not in self.ha_rules:
            raise die("no such ha rule '{0}'".format(v['rule']))
        return self._rule_doc(v['rule'], self._feasibility(self.ha_rules))

    # ------------------------------------------------------------ writing

    def _rule_params(self, v, create):
        """The isolated section-config schema of `createSchema`/`updateSchema`: `type` is
        required in both, every other option of that type only (and all optional on update)."""
        kind = v.get('type')
        if kind is None:
            raise PveError(400, 'Parameter verification failed.',
                           {'type': 'property is missing and it is not optional'})
        if kind not in TYPES:
            raise PveError(400, 'Parameter verification failed.',
                           {'type': "value '{0}' does not have a value in the enumeration '{1}'".format(
                               kind, ', '.join(sorted(TYPES)))})
        props = dict((k, dict(s, optional=1) if not create else s) for k, s in TYPES[kind].items())
        props['rule'] = {'type': 'string', 'format': 'pve-configid'}
        props['type'] = {'type': 'string'}
        if not create:
            props['digest'] = {'type': 'string', 'maxLength': 64, 'optional': 1}
            props['delete'] = {'type': 'string', 'format': 'pve-configid-list', 'optional': 1}
        values, errors = pve_schema.validate({'additionalProperties': 0, 'properties': props}, dict(v))
        for key, check in (('resources', _resources_error), ('nodes', _nodes_error)):
            if key in values and key not in errors:
                why = check(values[key])
                if why:
                    errors[key] = 'invalid format - ' + why
        if errors:
            raise PveError(400, 'Parameter verification failed.', errors)
        return values

    async def _rules_create(self, v, user):
        return self.rule_create(v)

    def rule_create(self, v):
        """`create_rule` (also how a seed file's rules are made)."""
        param = self._rule_params(v, True)
        kind, rule_id = param.pop('type'), param.pop('rule')
        if not param.get('disable'):
            param.pop('disable', None)
        rule = _decoded(kind, param)
        fail = 'create ha rule failed: '
        if rule_id in self.ha_rules:
            raise die(fail + "HA rule '{0}' already defined".format(rule_id))
        self._assert_resources(rule['resources'], fail)
        self._assert_nodes(rule.get('nodes'), fail)
        rules = dict(self.ha_rules, **{rule_id: rule})
        self._assert_feasibility(rules, rule_id, fail)
        self.ha_rules[rule_id] = rule
        # `get_next_ordinal` (sic: one more than the lowest ordinal in use); the file is written
        # in that order and read back numbered 1, 2, ... by position.
        self.ha_rules_order[rule_id] = (min(self.ha_rules_order.values()) if self.ha_rules_order else 0) + 1
        self._rules_renumber()
        return None

    def _rules_renumber(self):
        ids = sorted(self.ha_rules, key=lambda i: (self.ha_rules_order[i], i))
        self.ha_rules_order = dict((i, n) for n, i in enumerate(ids, 1))

    async def _rules_update(self, v, user):
        param = self._rule_params(v, False)
        rule_id = param.pop('rule')
        digest, delete = param.pop('digest', None), param.pop('delete', None)
        if not param.get('disable'):
            param.pop('disable', None)
        fail = 'update HA rules failed: '
        check_digest(self._rules_digest(), digest)
        if rule_id not in self.ha_rules:
            raise die(fail + "HA rule '{0}' does not exist".format(rule_id))
        rule = dict(self.ha_rules[rule_id])
        if param.pop('type') != rule['type']:
            raise die(fail + "unexpected property 'type'")
        changes = _decoded(rule['type'], param)
        if 'resources' in changes:
            self._assert_resources(changes['resources'], fail)
        self._assert_nodes(changes.get('nodes'), fail)
        # PVE::SectionConfig::delete_from_config: required options cannot go.
        for key in split_list(delete or ''):
            option = TYPES[rule['type']].get(key)
            if option is None:
                raise die(fail + "no such option '{0}'".format(key))
            if not option.get('optional'):
                raise die(fail + "unable to delete required option '{0}'".format(key))
            rule.pop(key, None)
        rule.update(changes)
        rules = dict(self.ha_rules, **{rule_id: rule})
        self._assert_feasibility(rules, rule_id, fail)
        self.ha_rules[rule_id] = rule
        return None

    async def _rules_delete(self, v, user):
        # delete_rule deletes what is there: an unknown rule is no error.
        self.ha_rules.pop(v['rule'], None)
        self.ha_rules_order.pop(v['rule'], None)
        self._rules_renumber()
        return None

    def _rules_forget_resource(self, sid):
        """`delete_service_from_config` with purge: the resource leaves every rule, and a rule
        left without resources goes."""
        for rule_id in sorted(self.ha_rules):
            self.ha_rules[rule_id]['resources'].discard(sid)
            if not self.ha_rules[rule_id]['resources']:
                del self.ha_rules[rule_id]
                del self.ha_rules_order[rule_id]
        self._rules_renumber()

    def _assert_resources(self, resources, fail):
        """`$assert_valid_resources_param`."""
        if not resources:
            raise die(fail + 'no resources were specified')
        unmanaged = sorted(sid for sid in resources if sid not in self.ha_resources)
        if unmanaged:
            raise die(fail + 'cannot use unmanaged resource(s) {0}.'.format(', '.join(unmanaged)))

    def _assert_nodes(self, nodes, fail):
        """`$assert_valid_nodes_param` (called only when the rule has nodes)."""
        if nodes is None:
            return
        if not nodes:
            raise die(fail + 'no nodes were specified')
        missing = sorted(n for n in nodes if n not in self.nodes)
        if missing:
            raise die(fail + 'cannot use non-existent node(s) {0}.'.format(', '.join(missing)))

    def _assert_feasibility(self, rules, rule_id, fail):
        """`$assert_feasibility`: a 400 exception, turned into text by `lock_ha_domain`."""
        errors = self._feasibility(rules).get(rule_id)
        if errors:
            lines = ''.join('{0}: {1}\n'.format(opt, ', '.join(msgs)) for opt, msgs in sorted(errors.items()))
            raise die(fail + "400 Rule '{0}' is invalid.\n{1}".format(rule_id, lines.rstrip("\n")))

    def _feasibility(self, rules):
        """`PVE::HA::Rules->check_feasibility`: rule id -> option -> messages."""
        return feasibility(rules, sorted(self.nodes))


# ---------------------------------------------------------------- values

def _resources_error(text):
    for sid in split_list(text):
        if not RESOURCE_ID.fullmatch(sid):
            return 'value does not look like a valid ha resource id\n'
    return None


def _nodes_error(text):
    for entry in split_list(text):
        if not NODE_PRIORITY.fullmatch(entry):
            return 'value does not look like a valid ha node\n'
    return None


def _decoded(kind, param):
    """`decode_value` of the base and the plugin: lists become a set and a node -> priority map."""
    rule = dict(param)
    if kind is not None:
        rule['type'] = kind
    if 'resources' in param:
        rule['resources'] = set(s for s in split_list(param['resources']) if RESOURCE_ID.fullmatch(s))
    if 'nodes' in param:
        nodes = {}
        for entry in split_list(param['nodes']):
            m = NODE_PRIORITY.fullmatch(entry)
            nodes[m.group(1)] = int(m.group(2) or 0)
        rule['nodes'] = nodes
    return rule


def _encoded(rule):
    """`encode_value`: resources sorted and comma-joined, nodes sorted with `:prio` unless 0."""
    doc = dict(rule)
    doc['resources'] = ','.join(sorted(rule['resources']))
    if 'nodes' in rule:
        doc['nodes'] = ','.join('{0}:{1}'.format(n, p) if p else n for n, p in sorted(rule['nodes'].items()))
    return doc


# ----------------------------------------------------------- feasibility

def feasibility(rules, nodes):
    """The checks of NodeAffinity.pm, ResourceAffinity.pm and Rules.pm, in registration order,
    over the enabled rules (`foreach_rule` with `exclude_disabled_rules`)."""
    live = {i: r for i, r in rules.items() if 'disable' not in r}
    node_affinity = {i: r for i, r in live.items() if r['type'] == 'node-affinity'}
    affinity = {i: r for i, r in live.items() if r['type'] == 'resource-affinity'}
    positive = {i: r for i, r in affinity.items() if r.get('affinity') == 'positive'}
    negative = {i: r for i, r in affinity.items() if r.get('affinity') == 'negative'}
    errors = {}

    def blame(rule_id, message):
        errors.setdefault(rule_id, {}).setdefault('resources', []).append(message)

    # NodeAffinity.pm check_single_resource_reference
    users = {}
    for rule_id, rule in sorted(node_affinity.items()):
        for sid in rule['resources']:
            users.setdefault(sid, []).append(rule_id)
    for sid, ids in sorted(users.items()):
        if len(ids) > 1:
            for rule_id in ids:
                blame(rule_id, "resource '{0}' is already used in another node affinity rule".format(sid))
    # ResourceAffinity.pm check_resource_affinity_resources_count
    for rule_id, rule in sorted(affinity.items()):
        if len(rule['resources']) < 2:
            blame(rule_id, 'rule is ineffective as there are less than two resources')
    # ResourceAffinity.pm check_negative_resource_affinity_resources_count
    for rule_id, rule in sorted(negative.items()):
        if len(rule['resources']) > len(nodes):
            blame(rule_id, 'rule defines more resources than available nodes')
    # ResourceAffinity.pm check_inter_resource_affinity_rules_consistency
    for ids, resources in _disjoint(positive):
        for rule_id, rule in sorted(negative.items()):
            if len(resources & rule['resources']) >= 2:
                blame(rule_id, 'rule shares two or more resources with a positive resource affinity rule')
                for pid in ids:
                    blame(pid, 'rule shares two or more resources with a negative resource affinity rule')
    _global_checks(node_affinity, affinity, positive, negative, blame)
    return errors


def _global_checks(node_affinity, affinity, positive, negative, blame):
    """Rules.pm: the checks between node affinity and resource affinity rules."""
    # check_single_priority_node_affinity_in_resource_affinity_rules
    for rule_id, rule in sorted(affinity.items()):
        paired = [i for i, n in sorted(node_affinity.items()) if rule['resources'] & n['resources']]
        if any(len(set(node_affinity[i]['nodes'].values())) > 1 for i in paired):
            blame(rule_id, 'resources are in node affinity rules with multiple priorities')
            for i in paired:
                blame(i, 'resources are in a resource affinity rule and cannot be in a node affinity rule'
                         ' with multiple priorities')
    # check_single_node_affinity_per_positive_resource_affinity_rule
    for ids, resources in _disjoint(positive):
        paired = [i for i, n in sorted(node_affinity.items()) if resources & n['resources']]
        if len(paired) > 1:
            for pid in ids:
                blame(pid, 'resources are in multiple node affinity rules')
            for i in paired:
                blame(i, 'at least one resource is in a positive resource affinity rule and there are other'
                         ' resources in at least one other node affinity rule already')
    # check_negative_resource_affinity_node_affinity_consistency
    for rule_id, rule in sorted(negative.items()):
        allowed, located, paired = set(), set(), []
        for i, n in sorted(node_affinity.items()):
            common = rule['resources'] & n['resources']
            if common:
                located |= common
                allowed |= set(n['nodes'])
                paired.append(i)
        if len(allowed) < len(located):
            blame(rule_id, 'two or more resources are restricted to less nodes than available to the resources')
            for i in paired:
                blame(i, 'at least one resource is in a negative resource affinity rule and this rule would'
                         ' restrict these to less nodes than available to the resources')


def _disjoint(rules):
    """`Rules/Helpers.pm` `find_disjoint_rules_resource_sets`: overlapping rules joined."""
    out = []
    for rule_id in sorted(rules, key=lambda i: (min(rules[i]['resources'] or ['']), i)):
        resources = rules[rule_id]['resources']
        for ids, joined in out:
            if joined & resources:
                ids.append(rule_id)
                joined |= resources
                break
        else:
            out.append(([rule_id], set(resources)))
    return out
