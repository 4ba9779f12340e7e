/** `npm run setup`: makes sure everything the demo and the tests need is installed. */
import { ensureTemporalCli } from '../config/temporal-cli';

ensureTemporalCli().then(
  (path) => console.log(`sterna: Temporal CLI ready at ${path}`),
  (err: Error) => {
    console.error(err.message);
    process.exit(1);
  },
);
