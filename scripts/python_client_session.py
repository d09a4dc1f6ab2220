"""A session of the official Kubernetes Python client against the harness.

Run by scripts/python-client.sh with KUBECONFIG pointing at the standalone
harness API server (TLS). Prints "python-client: N passed, 0 failed" when
every check holds; exits 1 on the first one that does not.
"""

import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

passed = 0


def check(what, condition, detail=""):
    global passed
    if not condition:
        print(f"FAIL: {what} {detail}")
        print(f"python-client: {passed} passed, 1 failed")
        sys.exit(1)
    passed += 1
    print(f"ok: {what}")


config.load_kube_config()
core = client.CoreV1Api()
apps = client.AppsV1Api()
rbac = client.RbacAuthorizationV1Api()

ns = "python-session"
core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
names = [n.metadata.name for n in core.list_namespace().items]
check("create and list namespaces", ns in names, str(names))

cm = core.create_namespaced_config_map(
    ns,
    client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings", labels={"tier": "gold"}),
        data={"color": "blue"},
    ),
)
check("create a configmap", cm.metadata.uid is not None)
check("read it back", core.read_namespaced_config_map("settings", ns).data == {"color": "blue"})

patched = core.patch_namespaced_config_map("settings", ns, {"data": {"size": "large"}})
check("strategic merge patch", patched.data == {"color": "blue", "size": "large"}, str(patched.data))

selected = core.list_namespaced_config_map(ns, label_selector="tier=gold").items
check("label selector", [c.metadata.name for c in selected] == ["settings"])

secret = core.create_namespaced_secret(
    ns,
    client.V1Secret(metadata=client.V1ObjectMeta(name="token"), string_data={"key": "s3cret"}),
)
check("stringData becomes data", secret.data == {"key": "czNjcmV0"}, str(secret.data))

deployment = apps.create_namespaced_deployment(
    ns,
    client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")]),
            ),
        ),
    ),
)
check("create a deployment (apps/v1)", deployment.spec.replicas == 2)

role = rbac.create_namespaced_role(
    ns,
    client.V1Role(
        metadata=client.V1ObjectMeta(name="reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])],
    ),
)
check("create a role (rbac)", role.rules[0].verbs == ["get"])

try:
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings"))
    )
    check("a duplicate is refused", False)
except ApiException as e:
    check("a duplicate is refused with 409", e.status == 409, str(e.status))

rv = core.list_namespaced_config_map(ns).metadata.resource_version
core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="later")))
seen = []
for event in watch.Watch().stream(
    core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5
):
    seen.append((event["type"], event["object"].metadata.name))
    if event["object"].metadata.name == "later":
        break
check("watch from a resourceVersion", ("ADDED", "later") in seen, str(seen))

core.delete_namespace(ns)
try:
    core.read_namespaced_config_map("settings", ns)
    gone = False
except ApiException as e:
    gone = e.status == 404
check("delete the namespace with its contents", gone)

print(f"python-client: {passed} passed, 0 failed")
