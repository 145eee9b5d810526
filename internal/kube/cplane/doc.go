// Package cplane runs a real Kubernetes control plane on this machine, without
// containers or a kubelet: etcd (its data on tmpfs), kube-apiserver on
// 127.0.0.1, optionally the Job and pod-GC controllers (kube-controllers) and
// kwok, which plays the kubelets of fake nodes through the stage files in
// stages.yaml. Gandiva's kube tests and `gandiva kube dev` use it.
//
// The binaries are those scripts/kube-tools builds from the Go module proxy
// into a versioned cache directory (BinDir); Start fails with ErrNoBinaries,
// naming that command, when they are missing.
//
// Every process is started with Pdeathsig (it dies with the process that
// started it) and Stop ends them and removes every file Start made. Ports are
// free ones taken at random on 127.0.0.1; a start that loses a port to
// another process is retried with new ones.
//
// Access: the API server serves TLS with a CA made for it, authenticates
// bearer tokens from a static token file (the admin, in group
// system:masters, and any users Options.Users names, with no rights until a
// test binds them some: least-privilege RBAC is tested that way) and
// authorises with RBAC. The ServiceAccount admission plugin and
// TaintNodesByCondition are off, since no controller-manager creates service
// accounts and no node controller lifts taints.
package cplane

// AnnExit is the pod annotation that kwok's stages (stages.yaml) read as
// the exit code of the pod's containers: 0 makes the pod Succeeded, any
// other code Failed. The test kubelet (kubetest) and `gandiva kube dev`'s
// player of pods' processes end a pod by writing it.
const AnnExit = "kubetest.gandiva.io/exit"
