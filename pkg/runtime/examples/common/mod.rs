//! The reference Pod the cache examples load (the same JSON as the client-go and
//! kube-runtime measurements: 1 container, a projected service-account volume,
//! full status, two managedFields entries); name, uid and pod IP vary with `i`.

use k8s_openapi::api::core::v1::Pod;

/// The reference pod of the client-go and kube-runtime measurements.
pub(crate) fn pod(i: usize) -> Result<Pod, serde_json::Error> {
    let json = format!(
        r#"{{
      "apiVersion":"v1","kind":"Pod",
      "metadata":{{"name":"web-7d4f4bd8dc-{i:05}","namespace":"default","uid":"3f0c2a6e-1b2c-4d5e-9f00-{i:012}",
        "resourceVersion":"{rv}","generateName":"web-7d4f4bd8dc-","creationTimestamp":"2026-01-01T00:00:00Z",
        "labels":{{"app":"web","pod-template-hash":"7d4f4bd8dc"}},
        "ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4f4bd8dc","uid":"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee","controller":true,"blockOwnerDeletion":true}}],
        "managedFields":[{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1",
           "fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}},"f:pod-template-hash":{{}}}},"f:ownerReferences":{{".":{{}},"k:{{\"uid\":\"aaaaaaaa\"}}":{{}}}}}},
           "f:spec":{{"f:containers":{{"k:{{\"name\":\"web\"}}":{{".":{{}},"f:image":{{}},"f:imagePullPolicy":{{}},"f:name":{{}},"f:ports":{{}},"f:resources":{{}}}}}},"f:dnsPolicy":{{}},"f:restartPolicy":{{}}}}}}}},
          {{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:05Z","fieldsType":"FieldsV1","subresource":"status",
           "fieldsV1":{{"f:status":{{"f:conditions":{{}},"f:containerStatuses":{{}},"f:hostIP":{{}},"f:phase":{{}},"f:podIP":{{}},"f:podIPs":{{}},"f:startTime":{{}}}}}}}}]}},
      "spec":{{"containers":[{{"name":"web","image":"nginx:1.27","imagePullPolicy":"IfNotPresent","ports":[{{"containerPort":80,"protocol":"TCP"}}],
          "resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",
          "volumeMounts":[{{"name":"kube-api-access-abcde","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}}]}}],
        "dnsPolicy":"ClusterFirst","enableServiceLinks":true,"nodeName":"node-1","preemptionPolicy":"PreemptLowerPriority","priority":0,
        "restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{{}},"serviceAccount":"default","serviceAccountName":"default",
        "terminationGracePeriodSeconds":30,
        "tolerations":[{{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300}},
                       {{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}}],
        "volumes":[{{"name":"kube-api-access-abcde","projected":{{"defaultMode":420,"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}},
            {{"configMap":{{"name":"kube-root-ca.crt","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}},
            {{"downwardAPI":{{"items":[{{"path":"namespace","fieldRef":{{"apiVersion":"v1","fieldPath":"metadata.namespace"}}}}]}}}}]}}}}]}},
      "status":{{"phase":"Running","hostIP":"10.0.0.1","podIP":"10.1.{a}.{b}","podIPs":[{{"ip":"10.1.0.1"}}],"qosClass":"Burstable",
        "startTime":"2026-01-01T00:00:01Z",
        "conditions":[{{"type":"Initialized","status":"True","lastTransitionTime":"2026-01-01T00:00:01Z"}},{{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}},
                      {{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}},{{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}}],
        "containerStatuses":[{{"name":"web","ready":true,"restartCount":0,"started":true,"image":"docker.io/library/nginx:1.27","imageID":"docker.io/library/nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
           "containerID":"containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","lastState":{{}},"state":{{"running":{{"startedAt":"2026-01-01T00:00:04Z"}}}}}}]}}
    }}"#,
        rv = 100_000 + i,
        a = i / 250,
        b = i % 250,
    );
    // From text, as the informer decodes what its watch delivers.
    serde_json::from_str(&json)
}

/// A client that is never called: the examples feed informers directly.
pub(crate) fn offline_client() -> kube::Client {
    let offline = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
    });
    kube::Client::new(offline, "default")
}
