/** Sterna's Prometheus metrics: the registry, the providers metered by it, and what visibility feeds it. */
export { meteredProviders } from './metered-provider';
export { sternaMetrics, type SternaMetrics } from './registry';
export { feedFromVisibility } from './visibility';
