import type { Balance, DailySpend } from '@oc/contracts';
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { api } from '../api';
import { usd } from '../format';
import { useMember } from '../session';
import { ErrorNote, Loading, PageHeader, useLoad } from '../ui';

export function Overview() {
  const { organization } = useMember();
  const balance = useLoad(() => api<Balance>('GET', '/balance'));
  const spend = useLoad(() => api<DailySpend>('GET', '/spend?days=30'));
  const limits = organization.limits;
  return (
    <>
      <PageHeader title="Overview" />
      <section className="cards" aria-label="Balance">
        <div className="card">
          <h2>Available</h2>
          <p className="figure" data-testid="available">{balance.data ? usd(balance.data.available) : '…'}</p>
        </div>
        <div className="card">
          <h2>Reserved</h2>
          <p className="figure" data-testid="reserved">{balance.data ? usd(balance.data.reserved) : '…'}</p>
          <p className="muted">held for work in progress</p>
        </div>
        <div className="card">
          <h2>Tier</h2>
          <p className="figure tier">{balance.data?.tier ?? organization.tier}</p>
          <p className="muted">
            {limits.requests_per_minute.toLocaleString('en-US')}/min · {limits.requests_per_day.toLocaleString('en-US')}/day
          </p>
        </div>
      </section>
      <ErrorNote error={balance.error} retry={balance.reload} />
      <section aria-labelledby="spend-title" className="panel">
        <h2 id="spend-title">
          Spend, last 30 days{spend.data ? `: ${usd(spend.data.total)}` : ''}
        </h2>
        <ErrorNote error={spend.error} retry={spend.reload} />
        {spend.loading && <Loading what="spend" />}
        {spend.data && (
          <>
            <div className="chart" role="img" aria-label={`Daily spend over the last 30 days, ${usd(spend.data.total)} in total`}>
              <ResponsiveContainer width="100%" height={240}>
                <BarChart data={spend.data.days} margin={{ top: 8, right: 8, bottom: 0, left: 0 }}>
                  <CartesianGrid strokeDasharray="3 3" vertical={false} />
                  <XAxis dataKey="date" tickFormatter={(d: string) => d.slice(5)} minTickGap={16} fontSize={12} />
                  <YAxis tickFormatter={(v: number) => `$${v}`} width={56} fontSize={12} />
                  <Tooltip formatter={(v) => usd(Number(v))} labelFormatter={(d) => String(d)} />
                  <Bar dataKey="amount" name="Charged" fill="#1d4ed8" isAnimationActive={false} />
                </BarChart>
              </ResponsiveContainer>
            </div>
            <details>
              <summary>Spend as a table</summary>
              <table>
                <thead>
                  <tr>
                    <th scope="col">Day (UTC)</th>
                    <th scope="col" className="num">Charged</th>
                  </tr>
                </thead>
                <tbody>
                  {spend.data.days
                    .filter((d) => d.amount > 0)
                    .map((d) => (
                      <tr key={d.date}>
                        <td>{d.date}</td>
                        <td className="num">{usd(d.amount)}</td>
                      </tr>
                    ))}
                </tbody>
              </table>
            </details>
          </>
        )}
      </section>
    </>
  );
}
