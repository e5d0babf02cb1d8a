//! The TLBs, from CPUID (x86-64): paper 000's Table 1 lists them beside the caches,
//! and the kernel's sysfs describes only caches.
//!
//! * AMD: the L1 and L2 TLB leaves (0x8000_0005 and 0x8000_0006) and the 1G-page leaf
//!   (0x8000_0019), each giving data and instruction TLBs per page size.
//! * Intel: the deterministic address translation leaf (0x18, Skylake and later), one
//!   sub-leaf per TLB with its page sizes, ways and sets. Older Intel cores describe
//!   their TLBs only by leaf 2's one-byte descriptors, which are not read: no rows.
//!
//! A hypervisor may hide or rewrite these leaves; what CPUID says is what is shown.

use smtlab_model::{CacheType, Tlb};

/// The TLBs of the CPU this runs on; empty where CPUID says nothing or off x86-64.
pub(crate) fn read() -> Vec<Tlb> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::read()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use raw_cpuid::{Associativity, CpuId, DatType};
    use smtlab_model::{CacheType, Tlb};

    pub(super) fn read() -> Vec<Tlb> {
        let cpuid = CpuId::new();
        let amd = cpuid
            .get_vendor_info()
            .is_some_and(|v| matches!(v.as_str(), "AuthenticAMD" | "HygonGenuine"));
        if amd {
            amd_tlbs(&cpuid)
        } else {
            intel_tlbs(&cpuid)
        }
    }

    /// Ways of an AMD TLB; `None` for fully associative.
    fn ways(a: Associativity) -> Option<u32> {
        match a {
            Associativity::DirectMapped => Some(1),
            Associativity::NWay(n) => Some(u32::from(n)),
            _ => None,
        }
    }

    /// A level's data and instruction TLBs for 4K and 2M/4M pages, from its leaf (the
    /// L1 and L2 leaves have the same methods but no trait in common).
    macro_rules! small_pages {
        ($level:expr, $leaf:expr) => {{
            let l = $leaf;
            [
                (
                    CacheType::Data,
                    "4K",
                    l.dtlb_4k_size(),
                    l.dtlb_4k_associativity(),
                ),
                (
                    CacheType::Data,
                    "2M/4M",
                    l.dtlb_2m_4m_size(),
                    l.dtlb_2m_4m_associativity(),
                ),
                (
                    CacheType::Instruction,
                    "4K",
                    l.itlb_4k_size(),
                    l.itlb_4k_associativity(),
                ),
                (
                    CacheType::Instruction,
                    "2M/4M",
                    l.itlb_2m_4m_size(),
                    l.itlb_2m_4m_associativity(),
                ),
            ]
            .map(|(t, p, n, a)| super::tlb($level, t, p, u32::from(n), ways(a)))
        }};
    }

    fn amd_tlbs(cpuid: &CpuId<raw_cpuid::CpuIdReaderNative>) -> Vec<Tlb> {
        let mut out = Vec::new();
        if let Some(l1) = cpuid.get_l1_cache_and_tlb_info() {
            out.extend(small_pages!(1, l1));
        }
        if let Some(l2) = cpuid.get_l2_l3_cache_and_tlb_info() {
            out.extend(small_pages!(2, l2));
        }
        if let Some(g) = cpuid.get_tlb_1gb_page_info() {
            out.extend(
                [
                    (
                        1,
                        CacheType::Data,
                        g.dtlb_l1_1gb_size(),
                        g.dtlb_l1_1gb_associativity(),
                    ),
                    (
                        1,
                        CacheType::Instruction,
                        g.itlb_l1_1gb_size(),
                        g.itlb_l1_1gb_associativity(),
                    ),
                    (
                        2,
                        CacheType::Data,
                        g.dtlb_l2_1gb_size(),
                        g.dtlb_l2_1gb_associativity(),
                    ),
                    (
                        2,
                        CacheType::Instruction,
                        g.itlb_l2_1gb_size(),
                        g.itlb_l2_1gb_associativity(),
                    ),
                ]
                .into_iter()
                .map(|(l, t, n, a)| super::tlb(l, t, "1G", u32::from(n), ways(a))),
            );
        }
        out.retain(|t| t.entries > 0);
        out
    }

    fn intel_tlbs(cpuid: &CpuId<raw_cpuid::CpuIdReaderNative>) -> Vec<Tlb> {
        let Some(dat) = cpuid.get_deterministic_address_translation_info() else {
            return Vec::new();
        };
        dat.filter_map(|d| {
            let kind = match d.cache_type() {
                DatType::DataTLB | DatType::LoadOnly | DatType::StoreOnly => CacheType::Data,
                DatType::InstructionTLB => CacheType::Instruction,
                DatType::UnifiedTLB => CacheType::Unified,
                _ => return None,
            };
            let pages: Vec<&str> = [
                (d.has_4k_entries(), "4K"),
                (d.has_2mb_entries(), "2M"),
                (d.has_4mb_entries(), "4M"),
                (d.has_1gb_entries(), "1G"),
            ]
            .into_iter()
            .filter_map(|(has, p)| has.then_some(p))
            .collect();
            let ways = d.ways() as u32;
            let entries = ways.saturating_mul(d.sets());
            let level = d.cache_level();
            let ways = (!d.is_fully_associative()).then_some(ways);
            Some(super::tlb(level, kind, &pages.join("/"), entries, ways))
        })
        .filter(|t| t.entries > 0)
        .collect()
    }
}

fn tlb(level: u8, tlb_type: CacheType, pages: &str, entries: u32, ways: Option<u32>) -> Tlb {
    Tlb {
        level,
        tlb_type,
        pages: pages.to_string(),
        entries,
        ways,
    }
}

#[cfg(test)]
mod tests {
    /// Whatever this CPU says: every TLB listed has entries, a level of 1 or 2 (or 3
    /// on some Intel cores) and page sizes; a fully associative one has no ways.
    #[test]
    fn tlbs_of_this_cpu_are_well_formed() {
        for t in super::read() {
            assert!(t.entries > 0, "{t:?}");
            assert!((1..=3).contains(&t.level), "{t:?}");
            assert!(!t.pages.is_empty(), "{t:?}");
            assert!(t.ways.is_none_or(|w| w > 0 && w <= t.entries), "{t:?}");
        }
    }
}
