// The Kubernetes manifests under deploy/k8s: no cluster runs here, so every object is checked
// against the Kubernetes API's own JSON schemas (kubernetes-models, from npm), the configs
// they carry are parsed by Radixgate's own config loader, and the wiring is checked: the
// routers list every engine pod by its stable name, both sides load the same model, the
// probes hit routes the server has, and Prometheus keeps the pods the manifests annotate.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { parseConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import { fitSpillBudget } from "../../src/serving/spill-budget.js";

const K8S = join(import.meta.dirname, "../../deploy/k8s");

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; annotations?: Record<string, string> }; [key: string]: unknown };

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1/ConfigMap": ConfigMap,
  "v1/Service": Service,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
};

function manifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(join(K8S, file), "utf8")).map((document) => document.toJS() as Manifest);
}

const kustomization = parseYaml(readFileSync(join(K8S, "kustomization.yaml"), "utf8")) as { resources: string[] };
const all = kustomization.resources.flatMap(manifests);
const find = <T = Manifest>(kind: string, name: string) => all.find((m) => m.kind === kind && m.metadata.name === name) as T & Manifest;

/** Validates one object against the Kubernetes schema of its kind; throws with the schema's errors. */
function validate(manifest: Manifest): void {
  const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
  if (!Model) throw new Error(`no schema for ${manifest.apiVersion} ${manifest.kind}`);
  new Model(manifest as never).validate();
}

interface PodSpec {
  containers: {
    ports: { name: string; containerPort: number }[];
    readinessProbe: { httpGet: { path: string; port: string } };
    livenessProbe: { httpGet: { path: string } };
    volumeMounts: { name: string; mountPath: string; subPath?: string }[];
    resources?: { limits?: { memory?: string } };
  }[];
  volumes: { name: string; configMap?: { name: string } }[];
}
interface Workload {
  spec: {
    replicas: number;
    serviceName?: string;
    template: { metadata: { annotations: Record<string, string>; labels: Record<string, string> }; spec: PodSpec };
  };
}

const configOf = (name: string): Config => parseConfig(parseYaml(find<{ data: Record<string, string> }>("ConfigMap", name).data["config.yml"]!), {}, name);

describe("deploy/k8s", () => {
  it("lists its files in the kustomization, and every object passes the Kubernetes API schema of its kind", () => {
    expect(kustomization.resources.sort()).toEqual(["engines.yaml", "prometheus.yaml", "router.yaml"]);
    expect(all.map((m) => `${m.kind}/${m.metadata.name}`).sort()).toEqual([
      "ConfigMap/radixgate-engine-config",
      "ConfigMap/radixgate-prometheus",
      "ConfigMap/radixgate-router-config",
      "Deployment/radixgate-router",
      "Service/radixgate",
      "Service/radixgate-engines",
      "StatefulSet/radixgate-engine",
    ]);
    for (const manifest of all) expect(() => validate(manifest), `${manifest.kind}/${manifest.metadata.name}`).not.toThrow();
  });

  it("the schema check catches a broken object", () => {
    const router = structuredClone(find("Deployment", "radixgate-router")) as Manifest & Workload;
    (router.spec as { replicas: unknown }).replicas = "two";
    expect(() => validate(router)).toThrow();
    const service = structuredClone(find("Service", "radixgate")) as Manifest & { spec: { ports: { port: unknown }[] } };
    delete service.spec.ports[0]!.port;
    expect(() => validate(service)).toThrow();
  });

  it("runs two routers in front of every engine pod found through the headless Service's name, on the same model, each a valid Radixgate config", () => {
    const engines = find<Workload>("StatefulSet", "radixgate-engine");
    const headless = find<{ spec: { clusterIP: string; ports: { port: number }[] } }>("Service", engines.spec.serviceName!);
    expect(headless.spec.clusterIP).toBe("None");
    const router = configOf("radixgate-router-config");
    const engine = configOf("radixgate-engine-config");
    expect(find<Workload>("Deployment", "radixgate-router").spec.replicas).toBe(2);
    const [model] = router.models;
    expect(model!.workers).toBe(0);
    expect(model!.source).toBe(engine.models[0]!.source);
    expect(model!.id).toBe(engine.models[0]!.id);
    // One entry: the Service's name, resolved to every pod's address (publishNotReadyAddresses: a pod is found while it starts).
    expect(model!.remote).toEqual([
      { kind: "radixgate", url: `http://${engines.spec.serviceName}:${headless.spec.ports[0]!.port}`, discover: "dns", discoverEveryS: 10 },
    ]);
    expect((headless.spec as { publishNotReadyAddresses?: boolean }).publishNotReadyAddresses).toBe(true);
    expect(engine.server.port).toBe(headless.spec.ports[0]!.port);
  });

  it("mounts each config where the image reads it, exposes the configured port, and probes routes the server has", () => {
    for (const [kind, name, config] of [
      ["StatefulSet", "radixgate-engine", "radixgate-engine-config"],
      ["Deployment", "radixgate-router", "radixgate-router-config"],
    ] as const) {
      const pod = find<Workload>(kind, name).spec.template.spec;
      const container = pod.containers[0]!;
      const mount = container.volumeMounts.find((m) => m.mountPath === "/app/config.yml")!;
      expect(mount.subPath).toBe("config.yml");
      expect(pod.volumes.find((v) => v.name === mount.name)?.configMap?.name).toBe(config);
      expect(container.ports[0]).toEqual({ name: "http", containerPort: configOf(config).server.port });
      for (const probe of [container.readinessProbe, container.livenessProbe]) expect(["/ready", "/health"]).toContain(probe.httpGet.path);
    }
    expect(find<Workload>("StatefulSet", "radixgate-engine").spec.template.spec.containers[0]!.readinessProbe.httpGet.path).toBe("/ready");
  });

  it("gives the engine's state store a /dev/shm that holds the default budget, within the pod's memory limit", () => {
    const pod = find<Workload>("StatefulSet", "radixgate-engine").spec.template.spec;
    const container = pod.containers[0]!;
    const mount = container.volumeMounts.find((m) => m.mountPath === "/dev/shm")!;
    const volume = pod.volumes.find((v) => v.name === mount.name) as { emptyDir?: { medium?: string; sizeLimit?: string } };
    expect(volume.emptyDir?.medium).toBe("Memory");
    const gib = (quantity: string) => Number(/^(\d+)Gi$/.exec(quantity)![1]);
    const engine = configOf("radixgate-engine-config");
    const shm = gib(volume.emptyDir!.sizeLimit!) * 2 ** 30;
    // One worker per pod (`auto`: one per GPU, and the pod has one); its store fills at most half the folder.
    expect(engine.models[0]!.workers).toBe("auto");
    expect(engine.spill.budgetBytes).toBeGreaterThan(0);
    expect(fitSpillBudget(engine.spill.budgetBytes, 1, shm)).toBe(engine.spill.budgetBytes);
    expect(gib(volume.emptyDir!.sizeLimit!)).toBeLessThan(gib(container.resources!.limits!.memory!));
  });

  it("has Prometheus keep exactly the pods the manifests annotate for scraping", () => {
    const prometheus = parseYaml(find<{ data: Record<string, string> }>("ConfigMap", "radixgate-prometheus").data["prometheus.yml"]!) as {
      scrape_configs: { kubernetes_sd_configs: { role: string }[]; relabel_configs: { source_labels: string[]; regex: string; action?: string }[] }[];
    };
    const job = prometheus.scrape_configs[0]!;
    expect(job.kubernetes_sd_configs[0]!.role).toBe("pod");
    const keeps = job.relabel_configs.filter((rule) => rule.action === "keep");
    for (const name of ["radixgate-engine", "radixgate-router"]) {
      const template = find<Workload>(name === "radixgate-engine" ? "StatefulSet" : "Deployment", name).spec.template.metadata;
      const value = (label: string) =>
        label.startsWith("__meta_kubernetes_pod_label_")
          ? template.labels[label === "__meta_kubernetes_pod_label_app_kubernetes_io_part_of" ? "app.kubernetes.io/part-of" : label]
          : template.annotations[label === "__meta_kubernetes_pod_annotation_prometheus_io_scrape" ? "prometheus.io/scrape" : label];
      for (const rule of keeps) expect(new RegExp(`^(?:${rule.regex})$`).test(value(rule.source_labels[0]!) ?? "")).toBe(true);
      expect(template.annotations["prometheus.io/port"]).toBe("8080");
      expect(template.annotations["prometheus.io/path"]).toBe("/metrics");
    }
  });
});
