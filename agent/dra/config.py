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

    def validate(self) -> None:
        from agent.dra.claims import dns_subdomain_error

        err = dns_subdomain_error(self.driver_name)
        if err:
            raise ValueError(f"driver_name {self.driver_name!r}: {err}")
        if not self.cdi_dir.startswith("/"):
            raise ValueError(f"cdi_dir must be an absolute path, got {self.cdi_dir!r}")


#: ``config[DRA_SECTION]``, the [dra] section
DRA_SECTION: SectionKey[DraConfig] = SectionKey("dra", DraConfig)
