"""A session of the official Kubernetes Python client against the harness.

Run by scripts/python-client.sh with KUBECONFIG pointing at the standalone
harness API server (TLS). Prints "python-client: N passed, 0 failed" when
every check holds; exits 1 on the first one that does not.
"""

import sys
import time

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

# A CustomResourceDefinition and custom objects.
extensions = client.ApiextensionsV1Api()
custom = client.CustomObjectsApi()
extensions.create_custom_resource_definition(
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "replicas": {"type": "integer", "maximum": 5},
                                        "mode": {"type": "string", "default": "slow"},
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"ready": {"type": "boolean"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
)
established = False
for _ in range(50):
    crd = extensions.read_custom_resource_definition("gadgets.example.com")
    conditions = (crd.status and crd.status.conditions) or []
    if any(c.type == "Established" and c.status == "True" for c in conditions):
        established = True
        break
    time.sleep(0.1)
check("a CRD is established", established)

gadget = custom.create_namespaced_custom_object(
    "example.com",
    "v1",
    ns,
    "gadgets",
    {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"replicas": 2}},
)
check("a custom object gets its schema default", gadget["spec"].get("mode") == "slow", str(gadget))
try:
    custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        ns,
        "gadgets",
        {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g2"}, "spec": {"replicas": 9}},
    )
    check("an invalid custom object is refused", False)
except ApiException as e:
    check(
        "an invalid custom object is refused with 422",
        e.status == 422 and "less than or equal to 5" in e.body,
        f"{e.status} {e.body}",
    )
status = custom.patch_namespaced_custom_object_status(
    "example.com", "v1", ns, "gadgets", "g1", {"status": {"ready": True}}
)
check("the status subresource", status.get("status") == {"ready": True}, str(status))
listed = custom.list_namespaced_custom_object("example.com", "v1", ns, "gadgets")
check("list custom objects", [g["metadata"]["name"] for g in listed["items"]] == ["g1"])
extensions.delete_custom_resource_definition("gadgets.example.com")
# kube-apiserver removes the objects after the CRD's finalizer runs (the
# harness at once): wait up to 30 s.
gone = None
for _ in range(300):
    try:
        custom.get_namespaced_custom_object("example.com", "v1", ns, "gadgets", "g1")
    except ApiException as e:
        gone = e.status
        if e.status == 404:
            break
    time.sleep(0.1)
check("deleting the CRD deletes its objects", gone == 404, str(gone))

core.delete_namespace(ns)
# The namespace controller empties it (kube-controller-manager; the harness
# at once): wait up to 30 s.
gone = False
for _ in range(300):
    try:
        core.read_namespace(ns)
    except ApiException as e:
        gone = e.status == 404
        if gone:
            break
    time.sleep(0.1)
check("delete the namespace with its contents", gone)
try:
    core.read_namespaced_config_map("settings", ns)
    check("its ConfigMap went with it", False)
except ApiException as e:
    check("its ConfigMap went with it", e.status == 404, str(e.status))

print(f"python-client: {passed} passed, 0 failed")
