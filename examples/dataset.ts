/**
 * A deterministic binary-classification dataset for the example trainer: points drawn
 * from two Gaussian clouds, written as CSV (features..., label). Same seed, same bytes.
 */
import { seededRandom } from '../workflows/api';

export function generateDataset(options: { seed?: number; rows?: number; features?: number } = {}): string {
  const random = seededRandom(options.seed ?? 42);
  const rows = options.rows ?? 2000;
  const features = options.features ?? 8;
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const label = i % 2;
    const x = Array.from({ length: features }, (_, j) => (gaussian() + (label ? 1 : -1) * (0.3 + j * 0.1)).toFixed(6));
    lines.push([...x, String(label)].join(','));
  }
  return lines.join('\n') + '\n';
}
