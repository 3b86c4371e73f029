"""The [dra] config section: the DRA driver's knobs (both modes)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import SectionKey

__all__ = ["DRA_SECTION", "DraConfig", "DEFAULT_DRIVER", "DEFAULT_CDI_DIR"]

DEFAULT_DRIVER = "hwagent.io"
DEFAULT_CDI_DIR = "/var/run/cdi"


@dataclass(frozen=True)
class DraConfig:
    #: run the DRA driver at all
    enabled: bool = True
    #: the driver name in ResourceSlices, allocation results and CDI kinds
    driver_name: str = DEFAULT_DRIVER
    #: where CDI spec files for prepared claims go (the container runtime reads them there)
    cdi_dir: str = DEFAULT_CDI_DIR
    #: the API server (kubelet mode): a kubeconfig file's absolute path, or "in-cluster" for the
    #: pod's service account. Set, claims are read from resource.k8s.io/v1 and the node's
    #: ResourceSlices published there (the optional `kubernetes` client); empty: claim files only
    kubeconfig: str = ""
    #: how often the node's slices are compared with the last published (seconds; changes only
    #: are written, and everything is listed again every RESYNC_S)
    publish_interval_s: float = 5.0

    def validate(self) -> None:
        from agent.dra.claims import dns_subdomain_error

        err = dns_subdomain_error(self.driver_name)
        if err:
            raise ValueError(f"driver_name {self.driver_name!r}: {err}")
        if not self.cdi_dir.startswith("/"):
            raise ValueError(f"cdi_dir must be an absolute path, got {self.cdi_dir!r}")
        if self.kubeconfig and self.kubeconfig != "in-cluster" and not self.kubeconfig.startswith("/"):
            raise ValueError(f"kubeconfig must be an absolute path or 'in-cluster', got {self.kubeconfig!r}")
        if not 0 < self.publish_interval_s <= 3600:
            raise ValueError(f"publish_interval_s must be in (0, 3600], got {self.publish_interval_s}")


#: ``config[DRA_SECTION]``, the [dra] section
DRA_SECTION: SectionKey[DraConfig] = SectionKey("dra", DraConfig)
