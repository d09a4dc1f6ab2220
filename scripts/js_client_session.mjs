// A session of the official Kubernetes JavaScript client
// (@kubernetes/client-node) against the harness. Run by scripts/js-client.sh
// with KUBECONFIG pointing at the standalone harness API server (TLS).
// Prints "js-client: N passed, 0 failed" when every check holds; exits 1 on
// the first one that does not.
import * as k8s from '@kubernetes/client-node';

let passed = 0;
function check(what, condition, detail = '') {
  if (!condition) {
    console.log(`FAIL: ${what} ${detail}`);
    console.log(`js-client: ${passed} passed, 1 failed`);
    process.exit(1);
  }
  passed += 1;
  console.log(`ok: ${what}`);
}

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
const apps = kc.makeApiClient(k8s.AppsV1Api);
const batch = kc.makeApiClient(k8s.BatchV1Api);

const namespace = 'js-session';
await core.createNamespace({ body: { metadata: { name: namespace } } });
const namespaces = (await core.listNamespace()).items.map((n) => n.metadata.name);
check('create and list namespaces', namespaces.includes(namespace), namespaces.join(','));

const cm = await core.createNamespacedConfigMap({
  namespace,
  body: { metadata: { name: 'settings', labels: { tier: 'gold' } }, data: { color: 'blue' } },
});
check('create a configmap', typeof cm.metadata.uid === 'string');
const read = await core.readNamespacedConfigMap({ name: 'settings', namespace });
check('read it back', read.data.color === 'blue');

const replaced = await core.replaceNamespacedConfigMap({
  name: 'settings',
  namespace,
  body: { ...read, data: { color: 'green' } },
});
check('replace with the read resourceVersion', replaced.data.color === 'green');

const selected = await core.listNamespacedConfigMap({ namespace, labelSelector: 'tier=gold' });
check('label selector', selected.items.length === 1 && selected.items[0].metadata.name === 'settings');

const deployment = await apps.createNamespacedDeployment({
  namespace,
  body: {
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: { containers: [{ name: 'web', image: 'nginx' }] },
      },
    },
  },
});
check('create a deployment (apps/v1)', deployment.spec.replicas === 3);

const job = await batch.createNamespacedJob({
  namespace,
  body: {
    metadata: { name: 'once' },
    spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } } },
  },
});
check('create a job (batch/v1)', job.metadata.name === 'once');

try {
  await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'settings' } } });
  check('a duplicate is refused', false);
} catch (e) {
  check('a duplicate is refused with 409', e.code === 409, String(e.code));
}

// A watch from the list's resourceVersion sees a later create.
const rv = (await core.listNamespacedConfigMap({ namespace })).metadata.resourceVersion;
const seen = [];
const sawLater = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`no event in 5 s: ${seen.join(',')}`)), 5000);
  new k8s.Watch(kc)
    .watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { resourceVersion: rv },
      (type, object) => {
        seen.push(`${type}:${object.metadata.name}`);
        if (object.metadata.name === 'later') {
          clearTimeout(timer);
          resolve(type);
        }
      },
      (err) => err && reject(err),
    )
    .then((req) => sawLater.finally(() => req.abort()).catch(() => {}));
});
await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'later' } } });
check('watch from a resourceVersion', (await sawLater) === 'ADDED', seen.join(','));

// A CustomResourceDefinition and custom objects.
const extensions = kc.makeApiClient(k8s.ApiextensionsV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
await extensions.createCustomResourceDefinition({
  body: {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'gadgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'gadgets', kind: 'Gadget' },
      versions: [{
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                properties: {
                  replicas: { type: 'integer', maximum: 5 },
                  // The client's model names the schema's `default` `_default`.
                  mode: { type: 'string', _default: 'slow' },
                },
              },
            },
          },
        },
      }],
    },
  },
});
let established = false;
for (let i = 0; i < 50 && !established; i += 1) {
  const crd = await extensions.readCustomResourceDefinition({ name: 'gadgets.example.com' });
  established = (crd.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True');
  if (!established) await new Promise((r) => setTimeout(r, 100));
}
check('a CRD is established', established);
const gadgetRef = { group: 'example.com', version: 'v1', namespace, plural: 'gadgets' };
const gadget = await custom.createNamespacedCustomObject({
  ...gadgetRef,
  body: { apiVersion: 'example.com/v1', kind: 'Gadget', metadata: { name: 'g1' }, spec: { replicas: 2 } },
});
check('a custom object gets its schema default', gadget.spec.mode === 'slow', JSON.stringify(gadget));
try {
  await custom.createNamespacedCustomObject({
    ...gadgetRef,
    body: { apiVersion: 'example.com/v1', kind: 'Gadget', metadata: { name: 'g2' }, spec: { replicas: 9 } },
  });
  check('an invalid custom object is refused', false);
} catch (e) {
  check('an invalid custom object is refused with 422',
    e.code === 422 && String(e.body).includes('less than or equal to 5'), `${e.code} ${e.body}`);
}
const listed = await custom.listNamespacedCustomObject(gadgetRef);
check('list custom objects', listed.items.map((g) => g.metadata.name).join(',') === 'g1');
// kube-apiserver deletes a CRD's objects and a namespace's contents through
// finalizers and controllers (the harness at once): wait up to 30 s for 404.
async function gone(read) {
  let last = 'still there';
  for (let i = 0; i < 300; i++) {
    try {
      await read();
    } catch (e) {
      last = String(e.code);
      if (e.code === 404) return [true, last];
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return [false, last];
}
await extensions.deleteCustomResourceDefinition({ name: 'gadgets.example.com' });
check('deleting the CRD deletes its objects',
  ...(await gone(() => custom.getNamespacedCustomObject({ ...gadgetRef, name: 'g1' }))));
await core.deleteNamespace({ name: namespace });
check('delete the namespace', ...(await gone(() => core.readNamespace({ name: namespace }))));
check('its contents went with it',
  ...(await gone(() => core.readNamespacedConfigMap({ name: 'settings', namespace }))));

console.log(`js-client: ${passed} passed, 0 failed`);
process.exit(0);
